package scenario

import "github.com/normsim/normsim/apiclient"

// APIError is a refusal of the simulator's API, as the reports show it.
type APIError = apiclient.Error
