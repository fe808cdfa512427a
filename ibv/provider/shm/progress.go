//go:build linux

package shm

import "sync"

// progress is the device's one goroutine. It does the QP work that must happen after the
// generic Modify has returned (which holds the QP's lock while the driver runs): loading an
// alternate path (REARM→ARMED), reporting SQ_DRAINED, and starting requests posted in SQD once
// the QP is back in RTS. It is owned by the device and stopped by Close.
type progress struct {
	mu    sync.Mutex
	queue []func()
	kick  chan struct{}
	done  chan struct{}
	wg    sync.WaitGroup
}

func (p *progress) start() {
	p.kick = make(chan struct{}, 1)
	p.done = make(chan struct{})
	p.wg.Add(1)
	go p.run()
}

// post queues f; it never blocks (the queue is unbounded and rarely used).
func (p *progress) post(f func()) {
	p.mu.Lock()
	p.queue = append(p.queue, f)
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *progress) run() {
	defer p.wg.Done()
	for {
		select {
		case <-p.done:
			return
		case <-p.kick:
		}
		for {
			p.mu.Lock()
			if len(p.queue) == 0 {
				p.mu.Unlock()
				break
			}
			f := p.queue[0]
			p.queue[0] = nil
			p.queue = p.queue[1:]
			p.mu.Unlock()
			f()
		}
	}
}

func (p *progress) stop() {
	close(p.done)
	p.wg.Wait()
}
