package bench

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrParse: text that is not an OSU table.
var ErrParse = errors.New("bench: not OSU output")

// Result is one benchmark's table: a header, column names and one row per size.
type Result struct {
	Name      string   `json:"name"`
	Title     string   `json:"title"`            // "# OSU MPI_Put Latency Test"
	Header    []string `json:"header,omitempty"` // further "# key: value" lines
	KeyLabel  string   `json:"key_label"`        // "Size" (bytes) or "Ranks"
	Columns   []string `json:"columns"`          // "Latency (us)", "Bandwidth (MB/s)", baselines...
	Rows      []Row    `json:"rows"`
	Sync      string   `json:"sync,omitempty"`
	Transport string   `json:"transport,omitempty"`
	Ranks     int      `json:"ranks,omitempty"`
	// Run is the goarmci build and the machine that produced the result (CurrentRun).
	Run *RunInfo `json:"run,omitempty"`
}

// Row is one line: the key (message size in bytes, or number of ranks) and one value per column.
type Row struct {
	Size   int       `json:"size"`
	Values []float64 `json:"values"`
}

// Column names of the OSU tables.
const (
	ColLatency   = "Latency (us)"
	ColBandwidth = "Bandwidth (MB/s)"
	ColGFlops    = "GFLOP/s"
)

// OSU text layout (osu_util.h): key column 10 wide, value columns 18 wide, 2 decimals.
const (
	keyWidth   = 10
	fieldWidth = 18
)

// WriteText writes r as OSU text: the title and header comment lines (the Header, a
// "Transport:" line if the Header has none, the "Version:" and "Machine:" lines of Run), the
// column header ("# Size          Latency (us)") and one row per size with two decimals.
func (r *Result) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	r.writeComments(bw)
	fmt.Fprintf(bw, "%-*s", keyWidth, "# "+r.keyLabel())
	for _, c := range r.Columns {
		fmt.Fprintf(bw, "%*s", max(fieldWidth, len(c)+2), c)
	}
	fmt.Fprintln(bw)
	for _, row := range r.Rows {
		fmt.Fprintf(bw, "%-*d", keyWidth, row.Size)
		for i, v := range row.Values {
			width := fieldWidth
			if i < len(r.Columns) {
				width = max(fieldWidth, len(r.Columns[i])+2)
			}
			fmt.Fprintf(bw, "%*.*f", width, 2, v)
		}
		fmt.Fprintln(bw)
	}
	return bw.Flush()
}

func (r *Result) keyLabel() string {
	if r.KeyLabel == "" {
		return "Size"
	}
	return r.KeyLabel
}

// writeComments writes the title and the header lines as "#" comment lines.
func (r *Result) writeComments(w io.Writer) {
	fmt.Fprintln(w, r.Title)
	for _, h := range headerLines(r.Header, r.Transport, r.Ranks, r.Run) {
		fmt.Fprintln(w, "# "+h)
	}
}

// writeCSV writes the title and header lines as "#" comments (as in the text format; a CSV
// reader skips them with Comment = '#'), a header record (size, then the columns) and one
// record per row.
func (r *Result) writeCSV(w io.Writer) error {
	bw := bufio.NewWriter(w)
	r.writeComments(bw)
	if err := bw.Flush(); err != nil {
		return err
	}
	cw := csv.NewWriter(w)
	rec := append([]string{strings.ToLower(r.keyLabel())}, r.Columns...)
	if err := cw.Write(rec); err != nil {
		return err
	}
	for _, row := range r.Rows {
		rec = rec[:0]
		rec = append(rec, strconv.Itoa(row.Size))
		for _, v := range row.Values {
			rec = append(rec, strconv.FormatFloat(v, 'f', 3, 64))
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteJSON writes r as one indented JSON object.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Write writes r in format "text" (or ""), "csv" or "json".
func (r *Result) Write(w io.Writer, format string) error {
	switch format {
	case "", "text", "osu":
		return r.WriteText(w)
	case "csv":
		return r.writeCSV(w)
	case "json":
		return r.WriteJSON(w)
	}
	return fmt.Errorf("%w: format %q (want text, csv or json)", ErrOptions, format)
}

// column returns the values of the column named name (nil when absent).
func (r *Result) column(name string) []float64 {
	for i, c := range r.Columns {
		if c == name {
			out := make([]float64, len(r.Rows))
			for k, row := range r.Rows {
				if i < len(row.Values) {
					out[k] = row.Values[i]
				}
			}
			return out
		}
	}
	return nil
}

// ParseOSU reads OSU text (ours or the OSU suite's, also with "[rank] " prefixes from a
// launcher): the first "# OSU"-style line is the title, other "#" lines are header lines, the
// last "#" line before the rows names the columns, and every further line is a row of a size
// and one number per column. Lines that are neither are errors (ErrParse).
func ParseOSU(rd io.Reader) (*Result, error) {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var r Result
	var comments []string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		line = stripRankPrefix(line)
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			if len(r.Rows) > 0 {
				return nil, fmt.Errorf("%w: comment %q after the rows", ErrParse, line)
			}
			comments = append(comments, line)
			continue
		}
		f := strings.Fields(line)
		size, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("%w: row %q", ErrParse, line)
		}
		row := Row{Size: size}
		for _, s := range f[1:] {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: row %q", ErrParse, line)
			}
			row.Values = append(row.Values, v)
		}
		if len(row.Values) == 0 {
			return nil, fmt.Errorf("%w: row %q has no value", ErrParse, line)
		}
		r.Rows = append(r.Rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(comments) < 2 {
		return nil, fmt.Errorf("%w: %d header lines, want a title and a column header", ErrParse, len(comments))
	}
	r.Title = comments[0]
	var run RunInfo
	for _, c := range comments[1 : len(comments)-1] {
		h := strings.TrimSpace(strings.TrimPrefix(c, "#"))
		if run.parseRunLine(h) {
			r.Run = &run
			continue
		}
		r.Header = append(r.Header, h)
	}
	label, cols, err := splitColumns(comments[len(comments)-1])
	if err != nil {
		return nil, err
	}
	r.KeyLabel, r.Columns = label, cols
	for _, row := range r.Rows {
		if len(row.Values) != len(cols) {
			return nil, fmt.Errorf("%w: row of size %d has %d values for %d columns", ErrParse, row.Size, len(row.Values), len(cols))
		}
	}
	return &r, nil
}

// splitColumns splits "# Size      Latency (us)    Bandwidth (MB/s)" at runs of ≥ 2 spaces.
func splitColumns(line string) (string, []string, error) {
	s := strings.TrimSpace(strings.TrimPrefix(line, "#"))
	var parts []string
	for _, p := range strings.Split(s, "  ") {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) < 2 {
		return "", nil, fmt.Errorf("%w: column header %q", ErrParse, line)
	}
	return parts[0], parts[1:], nil
}

// stripRankPrefix removes a launcher's "[3] " prefix.
func stripRankPrefix(line string) string {
	if strings.HasPrefix(line, "[") {
		if i := strings.Index(line, "] "); i > 1 {
			if _, err := strconv.Atoi(line[1:i]); err == nil {
				return strings.TrimSpace(line[i+2:])
			}
		}
	}
	return line
}
