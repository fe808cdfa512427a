package bench

import "math"

// PlotRequest is one figure, as `goarmci bench -plot` hands it to the plotting command
// (cmd/goarmci-plot, package bench/benchplot). Plotting lives apart so that the launcher's
// build does not compile the plotting stack. A request is either a Result (every column
// against the size) or a timeline (Series and Events under Title); it is plain JSON.
type PlotRequest struct {
	Path   string   `json:"path"` // the file to write; its extension picks the format (.png, .svg, .pdf)
	Result *Result  `json:"result,omitempty"`
	Title  string   `json:"title,omitempty"`
	Series []Series `json:"series,omitempty"`
	Events []Event  `json:"events,omitempty"`
}

// TimelinePlot is the request for a timeline figure: only the points a plot draws (time and
// bandwidth, non-finite values left out) travel.
func TimelinePlot(path, title string, series []Series, events []Event) PlotRequest {
	req := PlotRequest{Path: path, Title: title, Events: events}
	for _, s := range series {
		var tl Timeline
		for i := range min(len(s.TL.End), len(s.TL.BW)) {
			x, y := s.TL.End[i], s.TL.BW[i]
			if math.IsNaN(x) || math.IsInf(x, 0) || math.IsNaN(y) || math.IsInf(y, 0) {
				continue
			}
			tl.End, tl.BW = append(tl.End, x), append(tl.BW, y)
		}
		req.Series = append(req.Series, Series{Name: s.Name, TL: tl})
	}
	return req
}

// Series is one line of a timeline plot.
type Series struct {
	Name string   `json:"name"`
	TL   Timeline `json:"timeline"`
}

// Event is a vertical marker of a timeline plot at Ms (milliseconds from the start).
type Event struct {
	Name string  `json:"name"`
	Ms   float64 `json:"ms"`
}
