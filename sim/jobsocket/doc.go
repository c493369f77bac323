// Package jobsocket is a simulated worker node's job-socket listener: the
// WebSocket server of the contract's §1 that jobs dial with
// NORSK_WORKER_WS_URL. It authenticates each connection against the
// instances registered with it, enforces the frame rules and close codes,
// records every frame off the hot path, and hands each valid frame to the
// manager through a callback. To the manager it is a sim.JobSocket; its
// events and registrations are sim's types.
package jobsocket
