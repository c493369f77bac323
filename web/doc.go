// Package web is normsim's HTTP face: the JSON API under /api/v1, the live
// event stream (GET /api/v1/events, Server-Sent Events fed by the bus), and
// the dashboard.
//
// The dashboard is server-rendered with html/template; its templates, CSS
// and one small vanilla script are embedded (ui/), so it works offline with
// no build step. Pages: the overview (/), an instance (/instances/{id}), a
// migration's timeline (/migrations/{id}) and the history (/migrations).
// The script keeps them current: on an event that concerns the page it
// fetches the page again and swaps in the regions marked data-live.
//
// Forms post to /ui/... endpoints that redirect on success and show the
// page again with the simulator's refusal explained. Like every request they
// must name this server in Host (DNS rebinding); a form also needs a
// same-origin Origin and a CSRF token signed with a per-run key. Tokens of
// job sockets appear in a page only for external instances, where the
// developer must paste them, and never in logs.
package web
