// Package e2e holds the end-to-end tests of migrations: the whole simulator
// (app, web, the job sockets, a runtime) started in-process by normsimtest
// or as a `normsim up` process, driven over its API, with jobs played over
// real sockets. They live outside sim/manager so that the domain's unit
// tests link neither the web server nor app; the package has no code of its
// own.
package e2e
