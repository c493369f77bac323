// Package scenario owns the scenario files of `normsim ci`: parsing and
// validating them (every problem with its file:line:column), running them
// against a simulator over its HTTP API, judging each migration against its
// expectations, and writing the JUnit and JSON reports.
//
// A scenario names a template, its parameters and a runtime, and lists steps:
// launch an instance, wait, and migrate it with expectations on how the
// migration ends and what the output looked like at the seam. The format is
// documented in docs/ci.md and described by the JSON Schema that Schema
// returns (docs/scenario.schema.json).
//
// The package talks to the simulator through its API only, so the same
// runner drives an in-process simulator (what `normsim ci` starts) or one
// started some other way.
package scenario
