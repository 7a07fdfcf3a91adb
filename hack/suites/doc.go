// Package suites holds the test that keeps `make test` running every test
// suite: each Go module of the repository is a suite, and `go test ./...`
// at the root reaches only the root module.
package suites
