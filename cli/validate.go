package cli

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/normsim/normsim/sim/template"
)

func newValidateCmd(env Env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "validate PATH...",
		Short: "Check product templates against the contract",
		Long: `Check product templates: a template directory, a directory of templates, a
template .tar/.tar.gz, or a bare manifest.json. Prints one line per problem
with its code (MANIFEST_MISSING, MANIFEST_INVALID, PARAMETERS_INVALID,
COMPOSE_INVALID) and the field path. Other files (a README.md that a glob
such as templates/* picks up) are skipped with a note on stderr.

Exit status: 0 when every template is valid, 1 when one is not, 2 for a
usage error (including a path that does not exist), 130 when interrupted
(Ctrl-C) before every template was checked.`,
		Example: `  normsim validate templates/*
  normsim validate --json my-product.tar.gz`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErr("validate: give at least one PATH\nRun 'normsim validate --help' for usage.")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// Together, as a sim loads its template directories: a name
			// two paths share is a CONFLICT here as it is there.
			// A load stops at its next step when interrupted, but a step
			// inside compose-go cannot be stopped; the command does not
			// wait for it (the process ends with the command).
			type validated struct {
				all     []template.Result
				skipped []string
				err     error
			}
			done := make(chan validated, 1)
			load := validatePaths // read here, not by a goroutine that may outlive the command
			go func() {
				all, skipped, err := load(cmd.Context(), args)
				done <- validated{all, skipped, err}
			}()
			var v validated
			select {
			case v = <-done:
			case <-cmd.Context().Done():
			}
			if cmd.Context().Err() != nil {
				return &ExitError{Code: exitInterrupted, Err: errors.New("validate: interrupted before every template was checked")}
			}
			all, skipped, err := v.all, v.skipped, v.err
			if err != nil {
				return usageErr("%v", err)
			}
			for _, p := range skipped {
				// templates/* names the README beside the templates too;
				// say so and go on rather than judge it as a manifest.
				fmt.Fprintf(cmd.ErrOrStderr(), "skip  %s: %v\n", p, template.ErrNotATemplate)
			}
			if len(all) == 0 && len(skipped) > 0 {
				return usageErr("validate: none of the paths is a template")
			}
			out := cmd.OutOrStdout()
			bad := 0
			for _, r := range all {
				if !r.Valid {
					bad++
				}
			}
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				enc.Encode(all)
			} else {
				for _, r := range all {
					for _, w := range r.Warnings {
						fmt.Fprintf(out, "warn  %s: %s\n", r.Name, w)
					}
					if r.Valid {
						fmt.Fprintf(out, "ok    %s (%s)\n", r.Name, r.Path)
						continue
					}
					for _, p := range r.Problems {
						fmt.Fprintf(out, "FAIL  %s: %s %s\n", r.Name, p.Code, p.Message)
					}
				}
				fmt.Fprintf(out, "%d template(s) checked, %d invalid\n", len(all), bad)
			}
			if bad > 0 {
				return &ExitError{Code: 1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the results as JSON")
	return cmd
}

// validatePaths is template.ValidatePaths; a test stands in a load that
// does not stop.
var validatePaths = template.ValidatePaths
