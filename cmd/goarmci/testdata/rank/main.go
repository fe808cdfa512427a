// Command rank is a tiny goarmci program for the run command's end-to-end tests: it joins the
// rendezvous, AllGathers its rank and prints what it saw. Modes (first argument):
//
//	ok                 print and exit 0
//	fail R CODE        rank R exits with CODE after the exchange; the others wait in a barrier
//	sleep              every rank blocks until killed (signal forwarding test)
//	partial            print a last line without newline
//	selfkill R         rank R kills itself with SIGKILL after the exchange
//	report R CODE|kill rank R exits with CODE (or kills itself with SIGKILL) after the exchange;
//	                   the others ignore SIGTERM, print their barrier's error and exit 0
//	hang R             rank R sleeps; the others wait for it in a barrier (until killed)
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/goarmci/goarmci/internal/bootstrap"
)

func main() {
	mode := "ok"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	if mode == "report" {
		// from the start: goarmci run stops the others as soon as a rank fails, which may be
		// before this rank is past the exchange
		signal.Ignore(syscall.SIGTERM)
	}
	info, err := bootstrap.Detect()
	if err != nil {
		fmt.Fprintln(os.Stderr, "detect:", err)
		os.Exit(3)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := bootstrap.Connect(ctx, info)
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		os.Exit(4)
	}
	parts, err := c.AllGather(ctx, []byte(strconv.Itoa(c.Rank())))
	if err != nil {
		fmt.Fprintln(os.Stderr, "allgather:", err)
		os.Exit(5)
	}
	var seen []string
	for _, p := range parts {
		seen = append(seen, string(p))
	}
	fmt.Printf("rank %d of %d sees %s local %v\n", c.Rank(), c.Size(), strings.Join(seen, ","), c.LocalRanks())
	fmt.Fprintf(os.Stderr, "stderr of %d\n", c.Rank())
	switch mode {
	case "fail":
		r, _ := strconv.Atoi(os.Args[2])
		code, _ := strconv.Atoi(os.Args[3])
		if c.Rank() == r {
			os.Exit(code)
		}
		_ = c.Barrier(context.Background()) // never completes: rank r is gone
		time.Sleep(time.Hour)
	case "selfkill":
		r, _ := strconv.Atoi(os.Args[2])
		if c.Rank() == r {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		time.Sleep(time.Hour)
	case "report":
		r, _ := strconv.Atoi(os.Args[2])
		if c.Rank() == r {
			if os.Args[3] == "kill" {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
			code, _ := strconv.Atoi(os.Args[3])
			os.Exit(code)
		}
		fmt.Printf("barrier: %v\n", c.Barrier(context.Background()))
		os.Exit(0)
	case "hang":
		r, _ := strconv.Atoi(os.Args[2])
		if c.Rank() == r {
			time.Sleep(time.Hour)
		}
		_ = c.Barrier(context.Background())
	case "sleep":
		fmt.Fprintf(os.Stderr, "pid %d\n", os.Getpid())
		fmt.Println("sleeping")
		time.Sleep(time.Hour)
	case "partial":
		fmt.Print("no newline")
	}
	if err := c.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close:", err)
		os.Exit(6)
	}
}
