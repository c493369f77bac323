//go:build race

package jobsocket_test

// raceBuild: the race detector doubles every stack's guard and grows
// frames, so stack sizes mean something else under it.
const raceBuild = true
