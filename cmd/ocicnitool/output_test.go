package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTableNoRows checks that a listing without rows prints "(none)"
// under its header, and one with rows does not.
func TestTableNoRows(t *testing.T) {
	for _, tc := range []struct {
		name string
		fill func(t *table)
		want string
	}{
		{
			name: "rows",
			fill: func(t *table) { t.head("A", "B"); t.row("1", "2") },
			want: "A  B\n1  2\n",
		},
		{
			name: "no rows",
			fill: func(t *table) { t.head("A", "B") },
			want: "A  B\n(none)\n",
		},
		{
			name: "an empty section, then one with rows",
			fill: func(t *table) { t.head("A", "B"); t.section("NEXT"); t.head("C"); t.row("3") },
			want: "A  B\n(none)\n\nNEXT\nC\n3\n",
		},
		{
			name: "a section with rows, then an empty one",
			fill: func(t *table) { t.head("A"); t.row("1"); t.section("NEXT"); t.head("C", "D") },
			want: "A\n1\n\nNEXT\nC  D\n(none)\n",
		},
		{
			name: "a header followed by another header",
			fill: func(t *table) { t.head("A"); t.head("B"); t.row("2") },
			want: "A\n(none)\nB\n2\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, (&printer{w: &buf}).emit(nil, tc.fill))
			assert.Equal(t, tc.want, buf.String())
		})
	}
}

// TestEmptyListingsPrintNone runs the listing commands on empty
// directories: in a table, each empty listing prints "(none)" under its
// header; with --json, stdout stays a valid document whose listings are
// empty arrays.
func TestEmptyListingsPrintNone(t *testing.T) {
	for _, tc := range []struct {
		name        string
		args        []string
		wantCode    int
		cacheOnly   bool     // takes --cache-dir alone (stats: --conf-dir implies --conf)
		wantHeaders []string // the headers of the empty listings, as regexps
		wantJSON    []string // in the --json document
	}{
		{
			name:        "pending",
			args:        []string{"pending"},
			wantHeaders: []string{`CONTAINER +NETWORK +IFNAME +ATTEMPTS +SINCE +AGE +NEXT +LAST ERROR`},
			wantJSON:    []string{"[]\n"},
		},
		{
			name:        "cache ls",
			args:        []string{"cache", "ls"},
			cacheOnly:   true,
			wantHeaders: []string{`NETWORK +CONTAINER +IFNAME +NETNS +IPS +FILE +STATE +REASON`, `CONTAINER +# +NETWORK +IFNAME +NETNS +CACHED +STATE`},
			wantJSON:    []string{`"entries": []`, `"records": []`},
		},
		{
			name:        "stats",
			args:        []string{"stats"},
			cacheOnly:   true,
			wantHeaders: []string{`NETWORK +ATTACHMENTS +CACHED +PENDING`},
			wantJSON:    []string{`"networks": []`},
		},
		{
			name:        "stats --conf",
			args:        []string{"stats", "--conf"},
			wantCode:    exitNotFound, // no default network
			wantHeaders: []string{`NETWORK +ATTACHMENTS +CACHED +PENDING`, `NETWORK +DEFAULT`, `FILE +NETWORK +REASON`},
			wantJSON:    []string{`"networks": []`, `"skipped": []`},
		},
		{
			name:        "status",
			args:        []string{"status"},
			wantCode:    exitNotFound, // no default network
			wantHeaders: []string{`NETWORK +DEFAULT +STATUS +ERROR`},
			wantJSON:    []string{`"networks": []`, `"skipped": []`},
		},
		{
			name:        "gc",
			args:        []string{"gc", "--all"},
			wantHeaders: []string{`CONTAINER +NETWORK +IFNAME +OUTCOME +ERROR`},
			wantJSON:    []string{`"outcomes": []`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append(slices.Clone(tc.args), "--cache-dir", t.TempDir())
			if !tc.cacheOnly {
				args = append(args, "--conf-dir", t.TempDir(), "--bin-dir", t.TempDir())
			}

			r := mustRun(t, tc.wantCode, args...)
			for _, h := range tc.wantHeaders {
				assert.Regexp(t, `(?m)^`+h+`\n\(none\)$`, r.stdout)
			}
			headers := regexp.MustCompile(`(?m)^(?:` + strings.Join(tc.wantHeaders, "|") + `)$`)
			assert.Len(t, headers.FindAllString(r.stdout, -1), len(tc.wantHeaders), "each header once\n%s", r)
			assert.Equal(t, len(tc.wantHeaders), strings.Count(r.stdout, noRows), "only the empty listings say so\n%s", r)

			r = mustRun(t, tc.wantCode, append(args, "--json")...)
			assert.True(t, json.Valid([]byte(r.stdout)), "%s", r)
			assert.NotContains(t, r.stdout, noRows)
			for _, s := range tc.wantJSON {
				assert.Contains(t, r.stdout, s)
			}
		})
	}
}
