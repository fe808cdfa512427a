// Command goarmci-plot draws goarmci bench results with gonum/plot. It is a command of its own
// so that goarmci, the launcher, does not compile the plotting stack:
//
//	goarmci bench put_bw -format json > put_bw.json
//	goarmci-plot -o put_bw.png put_bw.json
//
// FILE arguments (or standard input) hold the JSON that `goarmci bench -format json` writes:
// one or more results, as objects or arrays. With several results, the name of each is added
// before the extension of -o (put_bw_ga_put.png, ...). The extension picks the format: .png,
// .svg, .pdf, .eps, .jpg, .tif.
//
// `goarmci bench ... -plot FILE.png` runs this command (found beside goarmci, in PATH, or
// through `go run` when goarmci was built from source) with -requests: standard input is then
// a stream of bench.PlotRequest objects, each naming its own file.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/goarmci/goarmci/bench"
	"github.com/goarmci/goarmci/bench/benchplot"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stderr))
}

const usage = `usage: goarmci-plot -o FILE.png [RESULTS.json ...]
       goarmci-plot -requests < REQUESTS.json

Draws the JSON results of goarmci bench -format json (files, or standard input) into FILE;
several results give one file each, named FILE_<benchmark>.png.

Flags:
`

// run is the command; it returns the exit code (2: bad command line, 1: a plot failed).
func run(args []string, stdin io.Reader, stderr io.Writer) int {
	fs := flag.NewFlagSet("goarmci-plot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "the file to write (extension: png, svg, pdf, eps, jpg, tif)")
	requests := fs.Bool("requests", false, "read bench.PlotRequest objects from standard input (what goarmci bench -plot sends)")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "goarmci-plot: %v\n", err)
		return 1
	}
	if *requests {
		if *out != "" || fs.NArg() > 0 {
			fmt.Fprintln(stderr, "goarmci-plot: -requests reads standard input only, without -o")
			return 2
		}
		reqs, err := decodeRequests(stdin)
		if err != nil {
			return fail(err)
		}
		for _, r := range reqs {
			if err := benchplot.Render(r); err != nil {
				return fail(fmt.Errorf("%s: %w", r.Path, err))
			}
		}
		return 0
	}
	if *out == "" {
		fmt.Fprintln(stderr, "goarmci-plot: missing -o FILE")
		fs.Usage()
		return 2
	}
	var results []*bench.Result
	inputs := fs.Args()
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	for _, in := range inputs {
		var rd io.Reader = stdin
		if in != "-" {
			b, err := os.ReadFile(in)
			if err != nil {
				return fail(err)
			}
			rd = bytes.NewReader(b)
		}
		rs, err := decodeResults(rd)
		if err != nil {
			return fail(fmt.Errorf("%s: %w", in, err))
		}
		results = append(results, rs...)
	}
	if len(results) == 0 {
		return fail(errors.New("no results in the input"))
	}
	for _, r := range results {
		path := *out
		if len(results) > 1 {
			ext := filepath.Ext(path)
			path = strings.TrimSuffix(path, ext) + "_" + fileTag(r.Name) + ext
		}
		if err := benchplot.WriteResult(r, path); err != nil {
			return fail(fmt.Errorf("%s: %w", path, err))
		}
	}
	return 0
}

// fileTag makes a result's name usable in a file name: "Put (MB/s)" → "Put_MB_s".
func fileTag(name string) string {
	var b strings.Builder
	for _, f := range strings.FieldsFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) {
		if b.Len() > 0 {
			b.WriteByte('_')
		}
		b.WriteString(f)
	}
	return b.String()
}

// decodeResults reads a stream of JSON results: objects, or arrays of them. Summary tables
// (bench.Table, with a "key" column and text keys: the scenarios print them beside their
// results) are skipped: they have no size axis to plot against.
func decodeResults(rd io.Reader) ([]*bench.Result, error) {
	dec := json.NewDecoder(rd)
	var out []*bench.Result
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) > 0 && raw[0] == '[' {
			var rs []*bench.Result
			if err := json.Unmarshal(raw, &rs); err != nil {
				return nil, err
			}
			out = append(out, rs...)
			continue
		}
		var table struct {
			Key *string `json:"key"`
		}
		if json.Unmarshal(raw, &table) == nil && table.Key != nil {
			continue
		}
		var r bench.Result
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, err
		}
		if len(r.Columns) == 0 {
			return nil, fmt.Errorf("not a bench result (no columns): %.80s", raw)
		}
		out = append(out, &r)
	}
}

// decodeRequests reads a stream of plot requests.
func decodeRequests(rd io.Reader) ([]bench.PlotRequest, error) {
	dec := json.NewDecoder(rd)
	var out []bench.PlotRequest
	for {
		var r bench.PlotRequest
		if err := dec.Decode(&r); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
}
