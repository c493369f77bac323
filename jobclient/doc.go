// Package jobclient is the job side of the job socket: what a job written in
// Go imports to take part in a handover migration (contract §2, strategy
// "handover"). It is the counterpart of the reference SDK's
// connectMigration.
//
// A job calls [Connect] once at start-up with a [Handler]. The client reads
// NORSK_WORKER_WS_URL and NORSK_WORKER_TOKEN, dials its worker in the
// background, says hello, and calls the handler as the worker drives a
// migration; it reconnects with backoff when the socket drops. Without those
// variables (a node run with --no-job-socket) Connect returns a client that
// does nothing, so the same job runs everywhere:
//
//	c := jobclient.Connect(ctx, jobclient.Handler{
//		// Source side.
//		GetState: func(ctx context.Context, migrationID string) (json.RawMessage, error) {
//			return json.Marshal(myState())
//		},
//		CutoverReady: func(ctx context.Context, migrationID string, ready json.RawMessage) (json.RawMessage, error) {
//			pos := stopOutput() // stop NOW, and say exactly where
//			return json.Marshal(pos)
//		},
//		// Target side.
//		InitialState: func(ctx context.Context, migrationID string, state json.RawMessage) (json.RawMessage, error) {
//			return nil, applyState(state) // nil payload: a plain "ready"
//		},
//		CutoverApply: func(ctx context.Context, migrationID string, stoppedAt json.RawMessage) (jobclient.Applied, error) {
//			return jobclient.Applied{}, startOutputFrom(stoppedAt)
//		},
//		// Either side: roll back (the source resumes its output).
//		Abort: func(migrationID, reason string) { resumeOutput() },
//	}, jobclient.Options{Logger: logger})
//	defer c.Close()
//
// The client owns two goroutines per connection, one reading frames and one
// calling the handler, so a slow handler never stops the client from seeing
// an abort: the abort cancels the handler's context. Handlers are called one
// at a time, in the order the worker's frames arrived. Close stops everything
// and waits for it.
//
// The client stops reconnecting only on the closes that retrying cannot fix:
// 4409, a newer connection for the instance took over ([ErrReplaced]), and
// 4401 for a wrong token or a path that names no instance
// ([ErrUnauthorized]). A 4401 whose reason says the hello came too late
// ("no hello within 5s", see protocol.ReasonHelloTimeout) is a drop like any
// other: the token may well be right, so the client reconnects.
package jobclient
