// Package protocol owns the job socket contract: the WebSocket that each
// worker node serves and that a job may speak to hand itself over between
// nodes (contract §1). Both ends use it: the worker's listener judges every
// frame a job sends with [ParseJobFrame], and the job-side client
// (package jobclient) judges every frame the worker sends with
// [ParseWorkerFrame]. Neither end declares a frame shape of its own.
//
// The reference is the TypeScript module migration-socket.js of
// @norskvideo/ctl-product-template-schema, which parses a frame with
// JSON.parse and then a zod schema. This package accepts and refuses exactly
// the frames that reference does, because a job that works under normsim must
// work under the real worker and vice versa. That rules out encoding/json for
// the judging: it matches struct fields case-insensitively, and its handling
// of duplicate keys depends on the json/v2 experiment. A small strict parser
// (json.go) reads each frame instead; it keeps the exact bytes of every
// value, so a payload is relayed byte for byte and never re-encoded.
//
// The package imports only the standard library so that any job written in
// Go can depend on it cheaply.
package protocol
