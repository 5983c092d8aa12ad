package main

import (
	"context"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// The constructors keep cri-o/ocicni's signatures (pkg/ocicni/ocicni.go).
// A change to any parameter or result breaks the build of this test.
var (
	_ func(defaultNetName, confDir string, binDirs ...string) (ocicni.CNIPlugin, error)           = ocicni.InitCNI
	_ func(defaultNetName, confDir, cacheDir string, binDirs ...string) (ocicni.CNIPlugin, error) = ocicni.InitCNIWithCache
	_ func(defaultNetName, confDir, cacheDir string, binDirs ...string) (ocicni.CNIPlugin, error) = ocicni.InitCNINoInotify
	_ ocicni.CNIPlugin                                                                            = (*ocicni.Manager)(nil)
	_ ocicni.CNIPlugin                                                                            = (*mockCNIPlugin)(nil)
)

// mockCNIPlugin has the method set that gomock generates for CRI-O's mock
// of ocicni.CNIPlugin. That it compiles as a CNIPlugin proves the interface
// asks for nothing more; TestMockSatisfiesInterface checks that it asks
// for nothing less.
type mockCNIPlugin struct{}

func (m *mockCNIPlugin) Name() string                  { return "mock" }
func (m *mockCNIPlugin) GetDefaultNetworkName() string { return "" }
func (m *mockCNIPlugin) SetUpPod(ocicni.PodNetwork) ([]ocicni.NetResult, error) {
	return nil, nil
}

func (m *mockCNIPlugin) SetUpPodWithContext(context.Context, ocicni.PodNetwork) ([]ocicni.NetResult, error) {
	return nil, nil
}

func (m *mockCNIPlugin) TearDownPod(ocicni.PodNetwork) error { return nil }

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
	require.NoError(t, mgr.waitReady(context.Background()))
	assert.True(t, mgr.ready)
	assert.Equal(t, "mock", mgr.plugin.Name())

	assert.Equal(t, methodNames(reflect.TypeOf(&mockCNIPlugin{})), methodNames(reflect.TypeOf((*ocicni.CNIPlugin)(nil)).Elem()),
		"the interface has exactly the methods runtimes mock")
}

// methodNames lists the exported methods of typ, sorted.
func methodNames(typ reflect.Type) []string {
	names := make([]string, 0, typ.NumMethod())
	for i := range typ.NumMethod() {
		names = append(names, typ.Method(i).Name)
	}
	return names
}
