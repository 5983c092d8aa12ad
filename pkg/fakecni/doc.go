// Package fakecni plays CNI plugins in memory, for tests: [Exec] is an
// invoke.Exec that libcni runs every plugin through without starting a
// process, and the NetNSOps of package ocicni without entering a network
// namespace. Answers are scripted per network and verb, calls are
// recorded, and [Gate]s hold calls until the test releases them.
//
// Runtimes reach it through package ocicni/ocicnitest, which names its
// types (FakeExec is [Exec]) and documents the fake's default answers,
// gates, find modes and limits. It is a package of its own, importing
// nothing of ocicni, so that the tests of every package, the engine's
// and the cache's included, use this one fake.
package fakecni
