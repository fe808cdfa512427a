package rma

import "testing"

// jobName keeps valid names and maps others to valid, distinct ones.
func TestJobName(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"abc_1-2", "abc_1-2"},
		{"1234.0", "1234-0-"},
		{"prterun-node-1@1", "prterun-node-1-1-"},
	} {
		got := jobName(tc.id)
		if tc.want == tc.id && got != tc.id || tc.want != tc.id && (len(got) != len(tc.want)+8 || got[:len(tc.want)] != tc.want) {
			t.Errorf("jobName(%q) = %q, want %q…", tc.id, got, tc.want)
		}
	}
	if jobName("1234.0") == jobName("1234-0") || jobName("1234.0") == jobName("1234.1") {
		t.Error("distinct ids map to one name")
	}
}
