package bootstrap

import (
	"fmt"
	"strconv"
	"strings"
)

// maxHostlist bounds the expansion of a hostlist so a hostile value cannot exhaust memory.
const maxHostlist = 1 << 20

// ExpandHostlist expands a Slurm hostlist such as "node[01-04,07],login1,r[1-2]n[1-2]" into
// host names in order ("node01", ..., "node07", "login1", "r1n1", "r1n2", "r2n1", "r2n2").
// Zero padding follows the width of a range's lower bound. Errors wrap ErrBadEnv.
func ExpandHostlist(s string) ([]string, error) {
	var out []string
	for _, item := range splitTop(s) {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		names, err := expandItem(item, len(out))
		if err != nil {
			return nil, fmt.Errorf("%w: hostlist %q: %v", ErrBadEnv, s, err)
		}
		out = append(out, names...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: empty hostlist %q", ErrBadEnv, s)
	}
	return out, nil
}

// splitTop splits at commas outside brackets.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

// expandItem expands one host expression with any number of bracket groups.
func expandItem(item string, have int) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.IndexByte(item, ']') >= 0 {
			return nil, fmt.Errorf("unmatched ']' in %q", item)
		}
		return []string{item}, nil
	}
	end := strings.IndexByte(item[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("unmatched '[' in %q", item)
	}
	end += open
	prefix, body, rest := item[:open], item[open+1:end], item[end+1:]
	if strings.ContainsAny(prefix, "]") || strings.ContainsAny(body, "[") {
		return nil, fmt.Errorf("bad brackets in %q", item)
	}
	var mids []string
	for r := range strings.SplitSeq(body, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.ParseUint(lo, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("bad number %q in %q", lo, item)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 32); err != nil {
				return nil, fmt.Errorf("bad number %q in %q", hi, item)
			}
		}
		if b < a {
			return nil, fmt.Errorf("descending range %q in %q", r, item)
		}
		if int(b-a)+len(mids)+have >= maxHostlist {
			return nil, fmt.Errorf("more than %d hosts", maxHostlist)
		}
		for n := a; n <= b; n++ {
			mids = append(mids, fmt.Sprintf("%0*d", len(lo), n))
		}
	}
	tails, err := expandItem(rest, have)
	if err != nil {
		return nil, err
	}
	if len(mids)*len(tails)+have > maxHostlist {
		return nil, fmt.Errorf("more than %d hosts", maxHostlist)
	}
	out := make([]string, 0, len(mids)*len(tails))
	for _, m := range mids {
		for _, t := range tails {
			out = append(out, prefix+m+t)
		}
	}
	return out, nil
}

// expandTasksPerNode expands Slurm's SLURM_TASKS_PER_NODE syntax "2(x3),1" into [2 2 2 1].
func expandTasksPerNode(s string) ([]int, error) {
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		count, rep := part, "1"
		if i := strings.IndexByte(part, '('); i >= 0 {
			if !strings.HasSuffix(part, ")") || !strings.HasPrefix(part[i+1:], "x") {
				return nil, fmt.Errorf("%w: tasks per node %q", ErrBadEnv, s)
			}
			count, rep = part[:i], part[i+2:len(part)-1]
		}
		c, err1 := strconv.Atoi(count)
		r, err2 := strconv.Atoi(rep)
		if err1 != nil || err2 != nil || c < 0 || r < 1 || r+len(out) > maxHostlist {
			return nil, fmt.Errorf("%w: tasks per node %q", ErrBadEnv, s)
		}
		for range r {
			out = append(out, c)
		}
	}
	return out, nil
}
