// Package gocni benchmarks pkg/gocni, ocicni's go-cni face, against
// github.com/containerd/go-cni v1.1.14 (what containerd v2.4.2 imports)
// and raw libcni, in containerd's configuration: the loopback network
// (WithLoNetwork) and a bridge + host-local network loaded from a conf
// dir (WithDefaultConf), with the namespace options containerd passes.
// BENCHMARKS.md reports the figures; .ci/bench runs them.
package gocni
