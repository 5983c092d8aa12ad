//go:build race

package main

// raceEnabled makes TestMain build the tool with -race too, so that a
// "go test -race" run also checks the subprocesses.
const raceEnabled = true
