package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/containernetworking/cni/pkg/types"
)

// printer writes a command's output: a table (text/tabwriter) for people,
// or one JSON document for scripts (--json). With --json, stdout holds
// nothing but that document.
type printer struct {
	w    io.Writer
	json bool
}

// emit writes v as indented JSON in JSON mode, and a table filled by fill
// otherwise.
func (p *printer) emit(v any, fill func(t *table)) error {
	if p.json {
		enc := json.NewEncoder(p.w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	t := &table{tw: tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)}
	fill(t)
	return t.flush()
}

// table is a tabwriter that takes rows as cells. Empty cells print as "-",
// so that every column stays visible. A listing starts with head; one
// that gets no row prints noRows under its header, so that an empty
// listing does not look cut short.
type table struct {
	tw     *tabwriter.Writer
	err    error
	headed bool // head was called, and no row since
}

// noRows is what a listing without rows prints under its header.
const noRows = "(none)"

// head prints the header of a listing.
func (t *table) head(cells ...string) {
	t.endListing()
	t.row(cells...)
	t.headed = true
}

// endListing prints noRows when the listing under the last head got no
// row.
func (t *table) endListing() {
	if t.headed && t.err == nil {
		_, t.err = fmt.Fprintln(t.tw, noRows)
	}
	t.headed = false
}

func (t *table) row(cells ...string) {
	t.headed = false
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
		// A tab or newline in a value (an error message, say) would break
		// the layout.
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(cells[i])
	}
	if t.err == nil {
		_, t.err = fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
	}
}

// section ends the current table and prints a title line before the next.
func (t *table) section(title string) {
	t.endListing()
	if err := t.tw.Flush(); err != nil && t.err == nil {
		t.err = err
	}
	if t.err == nil {
		_, t.err = fmt.Fprintf(t.tw, "\n%s\n", title)
	}
}

func (t *table) flush() error {
	t.endListing()
	if err := t.tw.Flush(); err != nil && t.err == nil {
		t.err = err
	}
	return t.err
}

// errorJSON is how an error appears inside a JSON document: its message,
// and the CNI error code when a plugin's *types.Error is in its chain.
type errorJSON struct {
	Message string `json:"message"`
	CNICode uint   `json:"cniCode,omitempty"`
}

func toErrorJSON(err error) *errorJSON {
	if err == nil {
		return nil
	}
	e := &errorJSON{Message: err.Error()}
	var cniErr *types.Error
	if errors.As(err, &cniErr) {
		e.CNICode = cniErr.Code
	}
	return e
}

// errText is err's message, or "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// join joins a list for a table cell.
func join(list []string) string { return strings.Join(list, ",") }
