package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/cache"
	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

func TestParseNetworks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      []string
		want    []ocicni.NetAttachment
		wantErr bool
	}{
		{name: "none", in: nil, want: []ocicni.NetAttachment{}},
		{name: "name", in: []string{"mynet"}, want: []ocicni.NetAttachment{{Name: "mynet"}}},
		{name: "name and ifname", in: []string{"a", "b:net1"}, want: []ocicni.NetAttachment{{Name: "a"}, {Name: "b", Ifname: "net1"}}},
		{name: "only the first colon splits", in: []string{"b:x:y"}, want: []ocicni.NetAttachment{{Name: "b", Ifname: "x:y"}}},
		{name: "empty name", in: []string{":eth0"}, wantErr: true},
		{name: "empty ifname", in: []string{"a:"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseNetworks(tc.in)
			if tc.wantErr {
				assert.Equal(t, exitUsage, exitCode(err), "%v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestListFlag(t *testing.T) {
	l := listFlag{values: []string{"/opt/cni/bin"}}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Var(&l, "bin-dir", "")
	require.NoError(t, fs.Parse([]string{"--bin-dir", "/a,/b", "-bin-dir", " /c ", "--bin-dir", ","}))
	assert.Equal(t, []string{"/a", "/b", "/c"}, l.values, "the default is replaced, not extended")
}

func TestResolveNetNS(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		wantErr  bool
	}{
		{in: "blue", want: "/run/netns/blue"},
		{in: "/var/run/netns/cni-1", want: "/var/run/netns/cni-1"},
		{in: "/run/netns/../netns/x", want: "/run/netns/x"},
		{in: "", wantErr: true},
		{in: ".", wantErr: true},
		{in: "..", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := resolveNetNS(tc.in)
			if tc.wantErr {
				assert.Equal(t, exitUsage, exitCode(err), "%v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		wantPos  []string
		wantJSON bool
		wantNet  []string
	}{
		{name: "flags first", args: []string{"--json", "ns", "id"}, wantPos: []string{"ns", "id"}, wantJSON: true},
		{name: "flags last", args: []string{"ns", "id", "--json"}, wantPos: []string{"ns", "id"}, wantJSON: true},
		{name: "interleaved", args: []string{"ns", "--network", "a", "id", "--network=b"}, wantPos: []string{"ns", "id"}, wantNet: []string{"a", "b"}},
		{name: "double dash ends flags", args: []string{"ns", "--", "--json"}, wantPos: []string{"ns", "--json"}},
		{name: "none", args: nil, wantPos: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			js := fs.Bool("json", false, "")
			var nets listFlag
			fs.Var(&nets, "network", "")
			pos, err := parseArgs(fs, tc.args)
			require.NoError(t, err)
			assert.Equal(t, tc.wantPos, pos)
			assert.Equal(t, tc.wantJSON, *js)
			assert.Equal(t, tc.wantNet, nets.values)
		})
	}
}

func TestExitCode(t *testing.T) {
	plain := errors.New("boom")
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{name: "nil", err: nil, want: exitOK},
		{name: "help", err: flag.ErrHelp, want: exitOK},
		{name: "plain failure", err: plain, want: exitFailed},
		{name: "network not found", err: fmt.Errorf("x: %w", &ocicni.NetworkNotFoundError{Network: "n"}), want: exitNotFound},
		{name: "no default network", err: fmt.Errorf("x: %w", ocicni.ErrNoDefaultNetwork), want: exitNotFound},
		{name: "invalid argument", err: &ocicni.InvalidArgumentError{Field: "container ID"}, want: exitUsage},
		{name: "invalid cache name", err: &cache.InvalidNameError{Field: "network"}, want: exitUsage},
		{name: "explicit code wins", err: withCode(exitPartial, fmt.Errorf("%w", ocicni.ErrNetworkNotFound)), want: exitPartial},
		{name: "wrapped explicit code", err: fmt.Errorf("x: %w", notFound(plain)), want: exitNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, exitCode(tc.err))
		})
	}
	assert.NoError(t, withCode(exitFailed, nil))
}
