package bench

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Table is a summary with a text key per row (a policy, a mode), as the scenario benchmarks
// print beside their OSU-style tables.
type Table struct {
	Name    string     `json:"name"`
	Title   string     `json:"title"`
	Header  []string   `json:"header,omitempty"`
	Key     string     `json:"key"`
	Columns []string   `json:"columns"`
	Rows    []TableRow `json:"rows"`
	Run     *RunInfo   `json:"run,omitempty"` // the goarmci build and the machine (CurrentRun)
}

// TableRow is one row: its key and one value per column (NaN = not measured, printed "-").
type TableRow struct {
	Key    string    `json:"key"`
	Values []float64 `json:"values"`
}

// MarshalJSON writes NaN values as null.
func (r TableRow) MarshalJSON() ([]byte, error) {
	vals := make([]*float64, len(r.Values))
	for i := range r.Values {
		if !math.IsNaN(r.Values[i]) && !math.IsInf(r.Values[i], 0) {
			vals[i] = &r.Values[i]
		}
	}
	return json.Marshal(struct {
		Key    string     `json:"key"`
		Values []*float64 `json:"values"`
	}{r.Key, vals})
}

// writeComments writes the title and the header lines (with the Run lines) as "#" comments.
func (t *Table) writeComments(w io.Writer) {
	fmt.Fprintln(w, t.Title)
	for _, h := range headerLines(t.Header, "", 0, t.Run) {
		fmt.Fprintln(w, "# "+h)
	}
}

// Write writes t as text (the OSU layout with a text key column), csv or json. Errors wrap
// ErrOptions for another format.
func (t *Table) Write(w io.Writer, format string) error {
	switch format {
	case "", "text", "osu":
		bw := bufio.NewWriter(w)
		t.writeComments(bw)
		kw := len(t.Key) + 2
		for _, r := range t.Rows {
			kw = max(kw, len(r.Key)+2)
		}
		fmt.Fprintf(bw, "%-*s", kw, "# "+t.Key)
		for _, c := range t.Columns {
			fmt.Fprintf(bw, "%*s", max(fieldWidth, len(c)+2), c)
		}
		fmt.Fprintln(bw)
		for _, r := range t.Rows {
			fmt.Fprintf(bw, "%-*s", kw, r.Key)
			for i, v := range r.Values {
				width := fieldWidth
				if i < len(t.Columns) {
					width = max(fieldWidth, len(t.Columns[i])+2)
				}
				if math.IsNaN(v) {
					fmt.Fprintf(bw, "%*s", width, "-")
				} else {
					fmt.Fprintf(bw, "%*.*f", width, 2, v)
				}
			}
			fmt.Fprintln(bw)
		}
		return bw.Flush()
	case "csv":
		bw := bufio.NewWriter(w)
		t.writeComments(bw)
		if err := bw.Flush(); err != nil {
			return err
		}
		cw := csv.NewWriter(w)
		rec := append([]string{strings.ToLower(t.Key)}, t.Columns...)
		if err := cw.Write(rec); err != nil {
			return err
		}
		for _, r := range t.Rows {
			rec = append(rec[:0], r.Key)
			for _, v := range r.Values {
				if math.IsNaN(v) {
					rec = append(rec, "")
				} else {
					rec = append(rec, strconv.FormatFloat(v, 'f', 3, 64))
				}
			}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(t)
	}
	return fmt.Errorf("%w: format %q (want text, csv or json)", ErrOptions, format)
}
