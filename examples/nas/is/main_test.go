package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSerialClassSReport(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-serial", "-class", "S"}, &out, &errb)
	assert.Equal(t, 0, code, errb.String())
	s := out.String()
	for _, l := range []string{" Class = S\n", " Ranks = 1\n", " Verification = SUCCESSFUL\n",
		" Time in seconds = ", " Mop/s total = ", " Size = 65536\n"} {
		assert.Contains(t, s, l)
	}
}

func TestBadClass(t *testing.T) {
	var out, errb bytes.Buffer
	assert.Equal(t, 2, run(context.Background(), []string{"-class", "Q"}, &out, &errb))
	assert.Contains(t, errb.String(), "unknown benchmark class")
}

// Without a launcher the program runs as a singleton job on the Global Arrays path.
func TestSingletonClassS(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-class", "S"}, &out, &errb)
	assert.Equal(t, 0, code, errb.String())
	s := out.String()
	for _, l := range []string{" Class = S\n", " Ranks = 1\n", " Verification = SUCCESSFUL\n", "Global Arrays"} {
		assert.Contains(t, s, l)
	}
}

func TestSerialBuckets(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-serial", "-buckets", "-class", "S"}, &out, &errb)
	assert.Equal(t, 0, code, errb.String())
	assert.Contains(t, out.String(), " Verification = SUCCESSFUL\n")
	assert.Contains(t, out.String(), "buckets")
}
