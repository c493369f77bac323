package sim

import "fmt"

// Strategy is how a running instance is moved between nodes.
type Strategy string

// The three strategies of the product-template contract.
const (
	Overlap       Strategy = "overlap"
	StopThenStart Strategy = "stopThenStart"
	Handover      Strategy = "handover"
)

// Strategies lists every strategy in the contract's order.
var Strategies = []Strategy{Overlap, StopThenStart, Handover}

// DefaultStrategy is what a manifest that declares nothing promises: the only
// strategy safe for a product that has said nothing about being moved.
const DefaultStrategy = StopThenStart

// ParseStrategy returns s as a Strategy, or an EUnprocessable error naming
// the allowed values.
func ParseStrategy(s string) (Strategy, error) {
	for _, st := range Strategies {
		if string(st) == s {
			return st, nil
		}
	}
	return "", Errorf(EUnprocessable, "strategy: must be one of overlap, stopThenStart, handover; got %q", s)
}

// DeclaredStrategy returns the strategy a manifest promises given its
// migration.strategy field ("" when absent).
func DeclaredStrategy(declared Strategy) Strategy {
	if declared == "" {
		return DefaultStrategy
	}
	return declared
}

// CheckStrategy reports whether a migrate request may use requested for a
// product that declared declared ("" = nothing). A request may ask for the
// declared strategy or for stopThenStart, never for one the product did not
// promise: overlap is not "safer" than handover, since a handover product
// never promised to tolerate a second writer.
func CheckStrategy(declared, requested Strategy) error {
	d := DeclaredStrategy(declared)
	if requested == d || requested == StopThenStart {
		return nil
	}
	if d == StopThenStart {
		return &Error{Code: EUnprocessable, Message: fmt.Sprintf(
			"strategy %q is not allowed: the template declares %q (or nothing), so a migration may only use %q",
			requested, d, StopThenStart)}
	}
	return &Error{Code: EUnprocessable, Message: fmt.Sprintf(
		"strategy %q is not allowed: the template declares %q, so a migration may use %q or %q",
		requested, d, d, StopThenStart)}
}

// AllowedStrategies lists the strategies a request may use for a product
// that declared declared, in the contract's order.
func AllowedStrategies(declared Strategy) []Strategy {
	var out []Strategy
	for _, s := range Strategies {
		if CheckStrategy(declared, s) == nil {
			out = append(out, s)
		}
	}
	return out
}
