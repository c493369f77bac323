package sim

import (
	"errors"
	"fmt"
)

// Error codes. A user-facing error carries one of these so the API can map it
// to an HTTP status and a CLI to an exit code; anything without a code is an
// internal error.
const (
	ENotFound      = "NOT_FOUND"     // unknown template, node, instance, migration
	EInvalid       = "INVALID_INPUT" // malformed request: bad JSON, unknown field
	EUnprocessable = "UNPROCESSABLE" // well-formed but refused by a rule (strategy, params)
	EConflict      = "CONFLICT"      // clashes with something already happening
	// ENotConnected: a handover from a source whose job is not connected
	// to its socket (422); a client may wait until it is and ask again.
	ENotConnected = "NOT_CONNECTED"
	EUnavailable  = "UNAVAILABLE" // a dependency (Docker engine, listener) is not there
	EInternal     = "INTERNAL"
	// EGone: a finished migration whose record the store's cap
	// (--keep-migrations) dropped; Error.Ended says how it ended (410).
	EGone = "GONE"

	// Template validation codes, from the product-template contract.
	EManifestMissing   = "MANIFEST_MISSING"
	EManifestInvalid   = "MANIFEST_INVALID"
	EParametersInvalid = "PARAMETERS_INVALID"
	EComposeInvalid    = "COMPOSE_INVALID"
	EParamsInvalid     = "PARAMS_INVALID"   // operator's parameter values refused at launch
	EImageMissing      = "IMAGE_MISSING"    // a service's image is not in the engine
	ETemplateInvalid   = "TEMPLATE_INVALID" // launch of a template that failed validation
)

// Error is a user-facing error: a code from the list above and a message that
// names the rule that was broken and the value that broke it.
type Error struct {
	Code    string
	Message string
	// Ended is, for EGone, the state the migration ended in.
	Ended MigrationState
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with the given code.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or EInternal.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// ErrorMessage returns the user-facing message of err: the *Error's message
// when there is one, otherwise a generic text that leaks nothing internal.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
