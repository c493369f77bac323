//go:build !race

package jobsocket_test

const raceBuild = false
