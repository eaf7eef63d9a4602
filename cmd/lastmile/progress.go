package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// progressBar shows a long command's steps on stderr. On a terminal it
// is one line redrawn in place, its bar filling within a step as time
// passes against the step's expected length; elsewhere (a log, a pipe)
// it prints one line per step and no control characters.
type progressBar struct {
	w      io.Writer
	tty    bool
	expect time.Duration // a step's expected length, for the fill within it

	mu      sync.Mutex
	step, n int
	what    string
	began   time.Time // the step's start
	start   time.Time // the first step's start
	stop    chan struct{}
	done    chan struct{}
}

func newProgressBar(w io.Writer, expect time.Duration) *progressBar {
	p := &progressBar{w: w, expect: expect}
	if f, ok := w.(*os.File); ok {
		_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
		p.tty = err == nil
	}
	return p
}

// Step says step i of n, what, has started.
func (p *progressBar) Step(i, n int, what string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.start.IsZero() {
		p.start = now
	}
	p.step, p.n, p.what, p.began = i, n, what, now
	if !p.tty {
		fmt.Fprintf(p.w, "[%d/%d] %s ...\n", i, n, what)
		return
	}
	if p.stop == nil {
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go p.tick()
	}
	p.drawLocked(now)
}

func (p *progressBar) tick() {
	defer close(p.done)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			p.mu.Lock()
			p.drawLocked(now)
			p.mu.Unlock()
		}
	}
}

func (p *progressBar) drawLocked(now time.Time) {
	const width = 24
	within := 0.0
	if p.expect > 0 {
		within = min(float64(now.Sub(p.began))/float64(p.expect), 0.95)
	}
	frac := (float64(p.step-1) + within) / float64(max(p.n, 1))
	fill := int(frac * width)
	fmt.Fprintf(p.w, "\r\033[K[%s%s] %3.0f%% %d/%d %s (%s)", strings.Repeat("#", fill), strings.Repeat(".", width-fill),
		100*frac, p.step, p.n, p.what, now.Sub(p.start).Round(time.Second))
}

// Done ends the bar, leaving the terminal's line clean.
func (p *progressBar) Done() {
	p.mu.Lock()
	stop := p.stop
	p.stop = nil
	p.mu.Unlock()
	if stop != nil {
		close(stop)
		<-p.done
		fmt.Fprint(p.w, "\r\033[K")
	}
}
