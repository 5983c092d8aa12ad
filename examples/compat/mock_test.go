package main

import (
	"context"
	"testing"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// mockCNIPlugin has the method set that gomock generates for CRI-O's mock
// of ocicni.CNIPlugin. It must keep compiling: that proves the interface
// still has exactly the methods runtimes mock.
type mockCNIPlugin struct{ calls []string }

func (m *mockCNIPlugin) Name() string                  { m.calls = append(m.calls, "Name"); return "mock" }
func (m *mockCNIPlugin) GetDefaultNetworkName() string { return "" }
func (m *mockCNIPlugin) SetUpPod(ocicni.PodNetwork) ([]ocicni.NetResult, error) {
	return nil, nil
}

func (m *mockCNIPlugin) SetUpPodWithContext(context.Context, ocicni.PodNetwork) ([]ocicni.NetResult, error) {
	return nil, nil
}
func (m *mockCNIPlugin) TearDownPod(ocicni.PodNetwork) error                             { return nil }
func (m *mockCNIPlugin) TearDownPodWithContext(context.Context, ocicni.PodNetwork) error { return nil }
func (m *mockCNIPlugin) GetPodNetworkStatus(ocicni.PodNetwork) ([]ocicni.NetResult, error) {
	return nil, nil
}

func (m *mockCNIPlugin) GetPodNetworkStatusWithContext(context.Context, ocicni.PodNetwork) ([]ocicni.NetResult, error) {
	return nil, nil
}
func (m *mockCNIPlugin) GC(context.Context, []*ocicni.PodNetwork) error { return nil }
func (m *mockCNIPlugin) Status() error                                  { return nil }
func (m *mockCNIPlugin) StatusWithContext(context.Context) error        { return nil }
func (m *mockCNIPlugin) Shutdown() error                                { return nil }

func TestMockSatisfiesInterface(t *testing.T) {
	var p ocicni.CNIPlugin = &mockCNIPlugin{}
	mgr := &cniManager{plugin: p}
	if err := mgr.waitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := mgr.plugin.Name(); got != "mock" {
		t.Fatalf("Name() = %q", got)
	}
	// The concrete manager satisfies the same interface.
	var _ ocicni.CNIPlugin = (*ocicni.Manager)(nil)
	// InitCNINoInotify keeps its signature.
	init := ocicni.InitCNINoInotify
	_ = init
}
