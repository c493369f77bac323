-- What normsim changed in the template's compose file to run the instance
-- beside others (a JSON list of sentences), shown after a restart too.
ALTER TABLE instances ADD COLUMN adjustments TEXT NOT NULL DEFAULT '[]';
