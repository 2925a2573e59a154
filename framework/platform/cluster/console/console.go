// Package console drives a guest's serial console: an idempotent login and
// commands whose output and exit status are read back reliably.
//
// Every expectation is anchored to the echo of the command it belongs to,
// as KubeVirt's console helpers do: output that arrived before the echo (a
// previous command's, a kernel message, a login banner) can never satisfy
// it, so a negative check cannot pass on stale output. The exit status comes
// from `echo` of `$?` behind a marker unique to the command: the echoed
// command line carries `$?` literally, so only the real result matches.
package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Prompt is the shell prompt the suite sets after login.
const Prompt = "vcf# "

// Console is a serial line to one guest.
type Console struct {
	line io.ReadWriteCloser
	log  io.Writer // everything the guest printed, as printed (the serial log)

	mu      sync.Mutex
	buf     strings.Builder // what the guest printed, escape sequences and CRs removed
	pos     int             // expectations search buf from here
	readErr error
	changed chan struct{} // closed and replaced whenever buf grows or reading ends
	esc     escState

	seq int
}

// New reads the line in the background; log (may be nil) receives the raw output.
func New(line io.ReadWriteCloser, log io.Writer) *Console {
	c := &Console{line: line, log: log, changed: make(chan struct{})}
	go c.read()
	return c
}

// Close closes the line.
func (c *Console) Close() error { return c.line.Close() }

func (c *Console) read() {
	b := make([]byte, 4096)
	for {
		n, err := c.line.Read(b)
		if n > 0 && c.log != nil {
			c.log.Write(b[:n])
		}
		c.mu.Lock()
		if n > 0 {
			c.buf.WriteString(c.esc.clean(b[:n]))
		}
		if err != nil {
			c.readErr = err
		}
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// escState strips ANSI escape sequences (CSI and two-byte ones) and CRs,
// even when a sequence is split across reads.
type escState struct{ inEsc, inCSI bool }

func (e *escState) clean(b []byte) string {
	var out strings.Builder
	for _, ch := range b {
		switch {
		case e.inCSI:
			if ch >= 0x40 && ch <= 0x7e {
				e.inCSI = false
			}
		case e.inEsc:
			e.inEsc = false
			if ch == '[' {
				e.inCSI = true
			}
		case ch == 0x1b:
			e.inEsc = true
		case ch == '\r', ch == 0x07, ch == 0:
		default:
			out.WriteByte(ch)
		}
	}
	return out.String()
}

// ErrTimeout is wrapped by every expectation that did not come true in time.
var ErrTimeout = errors.New("console: timed out")

// expect waits until re matches the output after the cursor, moves the
// cursor past the match and returns the submatches.
func (c *Console) expect(ctx context.Context, re *regexp.Regexp, timeout time.Duration) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		c.mu.Lock()
		s := c.buf.String()[c.pos:]
		if loc := re.FindStringSubmatchIndex(s); loc != nil {
			var groups []string
			for i := 0; i < len(loc); i += 2 {
				if loc[i] < 0 {
					groups = append(groups, "")
				} else {
					groups = append(groups, s[loc[i]:loc[i+1]])
				}
			}
			c.pos += loc[1]
			c.mu.Unlock()
			return groups, nil
		}
		rerr, ch := c.readErr, c.changed
		c.mu.Unlock()
		if rerr != nil {
			return nil, fmt.Errorf("console closed while waiting for %q: %w; last output:\n%s", re, rerr, tail(s, 400))
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w after %s waiting for %q; last output:\n%s", ErrTimeout, timeout, re, tail(s, 400))
		}
	}
}

// discard moves the cursor to the end: what is there now is stale.
func (c *Console) discard() {
	c.mu.Lock()
	c.pos = c.buf.Len()
	c.mu.Unlock()
}

func (c *Console) send(s string) error {
	_, err := io.WriteString(c.line, s)
	return err
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// The login's prompts end the output, but for console messages
// (consoleMessageRE) that may follow them: in a soak run cloud-init's final
// stage wrote right after sudo's root prompt, and a login that waited for
// the prompt to end the output timed out on a shell that was there.
const thenMessages = `(?:` + consoleMessage + `(?:\n|$))*$`

var (
	reLoginState = regexp.MustCompile(`(` + regexp.QuoteMeta(Prompt) + `|login: |[Pp]assword: |[$#] )` + thenMessages)
	rePassword   = regexp.MustCompile(`[Pp]assword: ` + thenMessages)
	reShell      = regexp.MustCompile(`[$#] ` + thenMessages)
	reRootShell  = regexp.MustCompile(`# ` + thenMessages)
)

// Login brings the console to the suite's root shell prompt, whatever state
// it is in: the login prompt after boot, a password prompt, a user shell, or
// already logged in (then it only checks the prompt). Boot output is waited
// out within timeout.
func (c *Console) Login(ctx context.Context, user, password string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	left := func() time.Duration { return max(time.Until(deadline), time.Second) }
	// Poked every 30 s until the deadline: under TCG with other guests
	// booting beside it, a guest's login prompt came after 4 minutes.
	for time.Now().Before(deadline) {
		c.discard()
		if err := c.send("\n"); err != nil {
			return err
		}
		m, err := c.expect(ctx, reLoginState, min(left(), 30*time.Second))
		if errors.Is(err, ErrTimeout) && time.Now().Before(deadline) {
			continue // still booting: poke again
		}
		if err != nil {
			return fmt.Errorf("login: %w", err)
		}
		switch {
		case m[1] == Prompt:
			return c.check(ctx)
		case strings.HasSuffix(m[1], "login: "):
			if err := c.send(user + "\n"); err != nil {
				return err
			}
			if _, err := c.expect(ctx, rePassword, 30*time.Second); err != nil {
				return fmt.Errorf("login as %s: %w", user, err)
			}
			fallthrough
		case rePassword.MatchString(m[1]):
			if err := c.send(password + "\n"); err != nil {
				return err
			}
			if _, err := c.expect(ctx, reShell, 60*time.Second); err != nil {
				return fmt.Errorf("login as %s: no shell after the password (wrong password, or cloud-init has not set it yet): %w", user, err)
			}
			fallthrough
		default: // a shell that is not ours yet
			if err := c.becomeRoot(ctx); err != nil {
				return err
			}
			return c.check(ctx)
		}
	}
	return fmt.Errorf("login: %w: no prompt within %s", ErrTimeout, timeout)
}

// becomeRoot makes the suite's shell: root (the image's user has
// passwordless sudo), a fixed prompt, no line wrapping, no bracketed paste.
func (c *Console) becomeRoot(ctx context.Context) error {
	c.discard()
	if err := c.send("sudo -i\n"); err != nil {
		return err
	}
	if _, err := c.expect(ctx, reRootShell, 30*time.Second); err != nil {
		return fmt.Errorf("sudo -i: %w", err)
	}
	setup := "export PS1='" + Prompt + "' PROMPT_COMMAND= HISTFILE=/dev/null; stty cols 4096 -echoctl; bind 'set enable-bracketed-paste off' 2>/dev/null\n"
	if err := c.send(setup); err != nil {
		return err
	}
	// The new prompt starts a line; it need not end the output: cloud-init's
	// final stage writes to the console too, and once its line came in the
	// same read as the prompt ("vcf# [  106.346714] cloud-init[278]: ...").
	// check's `id -u` then proves the shell answers.
	_, err := c.expect(ctx, regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(Prompt)), 30*time.Second)
	return err
}

func (c *Console) check(ctx context.Context) error {
	out, code, err := c.Run(ctx, "id -u", 30*time.Second)
	if err != nil {
		return err
	}
	if code != 0 || strings.TrimSpace(out) != "0" {
		return fmt.Errorf("login: the shell is not root (id -u: %q, exit %d)", out, code)
	}
	return nil
}

// Run runs cmd in the logged-in shell and returns its output (without the
// echoed command line, the marker and console messages) and its exit
// status. cmd must be one line.
func (c *Console) Run(ctx context.Context, cmd string, timeout time.Duration) (string, int, error) {
	if strings.ContainsAny(cmd, "\n\r") {
		return "", -1, fmt.Errorf("console: command must be one line: %q", cmd)
	}
	c.mu.Lock()
	c.seq++
	marker := fmt.Sprintf(":vcf%d:", c.seq)
	c.mu.Unlock()
	line := cmd + `; echo "` + marker + `$?:"`
	c.discard()
	if err := c.send(line + "\n"); err != nil {
		return "", -1, err
	}
	// Anchor: the echo of this very line. Nothing before it counts.
	if _, err := c.expect(ctx, echoRE(line), timeout); err != nil {
		return "", -1, fmt.Errorf("%q: no echo of the command: %w", cmd, err)
	}
	m, err := c.expect(ctx, regexp.MustCompile(`(?s)^(.*?)`+regexp.QuoteMeta(marker)+`(\d+):\n`), timeout)
	if err != nil {
		return "", -1, fmt.Errorf("%q: %w", cmd, err)
	}
	code, _ := strconv.Atoi(m[2])
	return commandOutput(m[1], line), code, nil
}

// echoRE matches the shell's echo of line, with console messages
// (consoleMessage) anywhere inside it: the kernel and cloud-init write
// beside the tty, and in CI one landed inside the echo of `cloud-init
// status --wait`, which then never matched.
func echoRE(line string) *regexp.Regexp {
	var b strings.Builder
	for _, r := range line {
		b.WriteString(regexp.QuoteMeta(string(r)) + `(?:` + consoleMessage + `\n)*`)
	}
	return regexp.MustCompile(b.String() + `\n`)
}

// commandOutput is what a command printed: out without the console's own
// lines (consoleMessageRE) and without the shell's echo of the command line
// printed again, as it was once in CI, prompt and all, after the echo the
// output is anchored on.
func commandOutput(out, line string) string {
	out = consoleMessageRE.ReplaceAllString(out, "")
	var kept []string
	for _, l := range strings.SplitAfter(out, "\n") {
		if !strings.HasSuffix(strings.TrimSuffix(l, "\n"), line) {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "")
}

// consoleMessageRE is a line the kernel or a service (through the journal
// or /dev/console) wrote to the serial console while a command ran, such as
// "[   43.184971] cloud-init[246]: ** WARNING **: Permissions for
// /etc/netplan/50-cloud-init.yaml are too open", seen in a login's `id -u`.
// It is not the command's output. It need not start a line: the console
// driver writes beside the tty, and in CI cloud-init's final line landed
// between `id -u`'s "0" and its newline ("0[   40.827536] cloud-init[248]:
// Cloud-init v. 22.4.2 finished ...\n\n").
var consoleMessageRE = regexp.MustCompile(consoleMessage + `\n`)

// consoleMessage is a console message's text up to its line's end: the
// kernel's time stamp, then anything.
const consoleMessage = `\[ *\d+\.\d{6}\] [^\n]*`
