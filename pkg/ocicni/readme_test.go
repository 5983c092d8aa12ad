package ocicni_test

import (
	"context"
	"errors"
	"log"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed-671fdd43/ocicni/pkg/ocicni"
)

// Example_setUpThenTearDown is the README's usage snippet, compiled (it
// is not run: it needs root, plugins and a namespace). The README shows
// its body; TestREADMESnippet keeps the two the same.
func Example_setUpThenTearDown() {
	ctx, sandboxID, uid := context.Background(), "3f2a9c", "9d6e-41"
	_ = func() error {
		m, err := ocicni.New(
			ocicni.WithConfDir("/etc/cni/net.d"),
			ocicni.WithBinDirs("/opt/cni/bin"),
			ocicni.WithLogger(logrus.WithField("component", "cni")),
		)
		if err != nil {
			return err
		}
		defer func() { _ = m.Shutdown() }()

		pod := ocicni.PodNetwork{
			Name: "web", Namespace: "default", ID: sandboxID, UID: uid,
			NetNS: "/var/run/netns/" + sandboxID, // Networks empty: the default network
		}
		results, err := m.SetUpPodWithContext(ctx, pod)
		if err != nil {
			return err // nothing is left attached: a failed setup rolls back
		}
		if _, ips, err := ocicni.SandboxIPs(results[0]); err == nil { // the default network's IPs
			log.Printf("pod %s: %v", pod.ID, ips)
		}

		// Later; with Networks empty the attachments come from the cache.
		if err := m.TearDownPodWithContext(ctx, pod); err != nil {
			var te *ocicni.TeardownError
			if errors.As(err, &te) {
				for _, f := range te.Failures() { // network, ifname, class, cause
					log.Printf("%s/%s: %s: %v", f.Network, f.IfName, f.Class, f.Err)
				}
			}
			return err // retry later if you can: DEL is idempotent, and healing retries it anyway
		}
		return nil
	}
}

// TestREADMESnippet checks that the README's usage snippet is the body of
// Example_setUpThenTearDown, which compiles with the package's tests.
func TestREADMESnippet(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(readme, -1)
	require.NotEmpty(t, blocks, "README.md has no Go snippet")
	snippet := string(blocks[0][1])
	src, err := os.ReadFile("readme_test.go")
	require.NoError(t, err)
	_, body, ok := strings.Cut(string(src), "\t_ = func() error {\n")
	require.True(t, ok, "the example's function literal")
	body, _, ok = strings.Cut(body, "\t}\n}\n")
	require.True(t, ok, "the example's end")
	var want strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		want.WriteString(strings.TrimPrefix(line, "\t\t") + "\n")
	}
	i := strings.Index(snippet, "\nfunc ")
	require.Positive(t, i, "the snippet declares its function after its imports")
	inner := snippet[strings.Index(snippet, "{\n")+2 : strings.LastIndex(snippet, "}")]
	var got strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(inner, "\n"), "\n") {
		got.WriteString(strings.TrimPrefix(line, "\t") + "\n")
	}
	assert.Equal(t, want.String(), got.String(), "README.md's snippet and Example_setUpThenTearDown differ")
	for _, imp := range []string{`"context"`, `"errors"`, `"log"`, `"github.com/sirupsen/logrus"`, `"github.com/seed-671fdd43/ocicni/pkg/ocicni"`} {
		assert.Contains(t, snippet[:i], imp, "the snippet imports what it uses")
	}
}
