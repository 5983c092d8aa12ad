// Package enginehook carries what package ocicni's manager offers this
// module's faces and not its users, so that the engine's exported API
// stays that of cri-o/ocicni: today one option, [WithMemorySource], by
// which package gocni hands the engine the networks it has parsed
// instead of writing them to a conf dir for the engine to read back.
//
// Package ocicni fills the hooks in at init, as grpc fills in its
// internal hooks: this package cannot name package ocicni's types, since
// package ocicni imports it, so a hook is declared as any and documented
// with its dynamic type. A face type-asserts it once (a mismatch is a
// bug of this module, found by any test of the face).
package enginehook

// WithMemorySource is a func(*netconf.MemorySource) ocicni.Option: the
// option makes the manager load its networks from the source instead of
// its conf dir, and start no config watcher, since nothing is on disk to
// watch. The caller updates the source with [netconf.MemorySource.Set]
// and then publishes it with Manager.Reload. Package ocicni sets it at
// init.
var WithMemorySource any
