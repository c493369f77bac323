// Package testenv gives tests the real dependencies this machine may or may
// not have: a Docker engine, a Chromium-family browser, free ports. A test
// that needs one skips with a clear message where it is absent, and fails
// instead when CI asks for it (NORMSIM_REQUIRE_DOCKER=1,
// NORMSIM_REQUIRE_BROWSER=1, NORMSIM_REQUIRE_LANGUAGES=1 for the Python and
// Node interpreters of the example jobs in other languages).
package testenv
