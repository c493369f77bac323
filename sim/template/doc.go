// Package template loads product templates and applies the launch contract.
//
// A product template is a directory, or a .tar / .tar.gz / .tgz archive, with
// manifest.json, compose.yml and optionally parameters.yaml at its root (see
// docs/contract.md §3). Load validates one template in the contract's order
// (MANIFEST_MISSING, MANIFEST_INVALID, PARAMETERS_INVALID, then
// COMPOSE_INVALID) and records every problem it finds instead of returning an
// error, so a broken template is listed, never silently dropped. LoadDirs
// builds a Catalog, normsim's sim.Catalog, from directories of templates.
// LoadContext, LoadDirs and ValidatePath(s) stop when their context ends.
//
// Before a YAML file reaches a loader, what it costs with its aliases
// expanded is bounded (nodes, text, and the paths compose-go builds; see
// yamlbounds.go and docs/contract.md, "Template size bounds"): a few
// kilobytes of aliases or nested long keys would otherwise cost compose-go
// gigabytes and minutes.
//
// The manifest and parameters.yaml are judged the way the reference zod
// schemas judge them: keys are case-sensitive, unknown keys are dropped at
// every level, an optional field that is present must have the right type
// (null is never a value), integers must be whole and numbers finite.
//
// Catalog.Launch is the launch contract: from a template, the operator's
// parameter values and the node, the concrete services an instance runs,
// with the job-socket env, the allocated ports, the extra_hosts entry and
// normsim's labels. It is pure apart from probing whether a port is free
// (and reading env_file entries the compose file names).
package template
