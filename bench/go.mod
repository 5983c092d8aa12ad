// Module bench holds the benchmarks that need no unexported name of the
// library: those of the engine through its exported API (ocicni/), and
// those that pair ocicni with third-party libraries it replaces (go-cni,
// for pkg/gocni, in gocni/). It is a separate module so that those
// libraries never enter the library's go.mod; see BENCHMARKS.md.
module github.com/seed-671fdd43/ocicni/bench

go 1.24.0

require (
	github.com/containerd/go-cni v1.1.14
	github.com/containernetworking/cni v1.3.1
	github.com/seed-671fdd43/ocicni v0.0.0-00010101000000-000000000000
	github.com/sirupsen/logrus v1.9.4
	github.com/stretchr/testify v1.11.1
	go.opentelemetry.io/otel/sdk v1.29.0
	go.opentelemetry.io/otel/sdk/metric v1.29.0
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/fsnotify/fsnotify v1.9.0 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/petermattis/goid v0.0.0-20240813172612-4fcff4a6cae7 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/sasha-s/go-deadlock v0.3.5 // indirect
	go.opentelemetry.io/otel v1.29.0 // indirect
	go.opentelemetry.io/otel/metric v1.29.0 // indirect
	go.opentelemetry.io/otel/trace v1.29.0 // indirect
	golang.org/x/sys v0.24.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

replace github.com/seed-671fdd43/ocicni => ../
