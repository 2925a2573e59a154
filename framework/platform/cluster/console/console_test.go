package console

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeGuest is a scripted serial console: a login prompt after some boot
// noise, a user shell, sudo, and commands answered from a table. Hooks let
// a test put stale output on the line before a command's echo.
type fakeGuest struct {
	t        *testing.T
	out      *io.PipeWriter // guest -> console
	in       *io.PipeReader // console -> guest
	user     string
	password string
	answers  map[string]answer // command -> answer
	// beforeEcho is printed when a command arrives, before its echo.
	beforeEcho func(cmd string) string
	noEcho     bool
	// afterPrompt is printed with the suite's first prompt, in the same
	// write: a console message that lands right after it.
	afterPrompt string
	// afterLoginPrompts is printed the same way after every prompt before
	// the suite's: login, password, the user's shell, root's.
	afterLoginPrompts string

	mu       sync.Mutex
	received []string
	state    string // "boot", "password", "user", "root", "suite"
	prompt   string
}

type answer struct {
	out  string
	code int
}

type pipeLine struct {
	io.Reader
	io.Writer
	closers []io.Closer
}

func (p pipeLine) Close() error {
	for _, c := range p.closers {
		c.Close()
	}
	return nil
}

func newFake(t *testing.T) (*fakeGuest, *Console) {
	gr, cw := io.Pipe() // console writes, guest reads
	cr, gw := io.Pipe() // guest writes, console reads
	g := &fakeGuest{t: t, out: gw, in: gr, user: "ubuntu", password: "pw", answers: map[string]answer{}, state: "boot"}
	c := New(pipeLine{Reader: cr, Writer: cw, closers: []io.Closer{cw, cr}}, nil)
	t.Cleanup(func() { c.Close(); gw.Close(); gr.Close() })
	go g.serve()
	return g, c
}

func (g *fakeGuest) print(s string) { io.WriteString(g.out, strings.ReplaceAll(s, "\n", "\r\n")) }

var reSuiteLine = regexp.MustCompile(`^(.*); echo "(:vcf\d+:)\$\?:"$`)

func (g *fakeGuest) serve() {
	r := bufio.NewReader(g.in)
	g.print("[    0.000000] Linux version 6.8.0 (buildd@ubuntu)\n[  OK  ] Reached target cloud-init.target\n")
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		g.mu.Lock()
		g.received = append(g.received, line)
		state := g.state
		g.mu.Unlock()
		switch state {
		case "boot":
			g.print("\nvm-a login: " + g.afterLoginPrompts)
			g.set("login")
		case "login":
			if line == "" {
				g.print("\nvm-a login: ")
				continue
			}
			g.print(line + "\nPassword: " + g.afterLoginPrompts)
			g.set("password")
		case "password":
			if line != g.password {
				g.print("\nLogin incorrect\nvm-a login: ")
				g.set("login")
				continue
			}
			g.print("\nWelcome to Ubuntu 24.04 LTS\n\x1b[?2004hubuntu@vm-a:~$ " + g.afterLoginPrompts)
			g.set("user")
		case "user":
			if line == "sudo -i" {
				g.print(line + "\n\x1b[?2004hroot@vm-a:~# " + g.afterLoginPrompts)
				g.set("root")
				continue
			}
			g.print(line + "\nubuntu@vm-a:~$ ")
		case "root":
			if m := regexp.MustCompile(`PS1='([^']*)'`).FindStringSubmatch(line); m != nil {
				g.prompt = m[1]
				g.print(line + "\n" + g.prompt + g.afterPrompt)
				g.set("suite")
				continue
			}
			g.print(line + "\nroot@vm-a:~# ")
		case "suite":
			if line == "" {
				g.print("\n" + g.prompt)
				continue
			}
			m := reSuiteLine.FindStringSubmatch(line)
			if m == nil {
				g.print(line + "\n" + g.prompt)
				continue
			}
			if g.beforeEcho != nil {
				g.print(g.beforeEcho(m[1]))
			}
			if g.noEcho {
				continue
			}
			a, ok := g.answers[m[1]]
			if !ok && m[1] == "id -u" {
				a = answer{out: "0\n"}
			} else if !ok {
				a = answer{out: m[1] + ": command not found\n", code: 127}
			}
			g.print(line + "\n" + a.out + fmt.Sprintf("%s%d:\n", m[2], a.code) + g.prompt)
		}
	}
}

func (g *fakeGuest) set(s string) { g.mu.Lock(); g.state = s; g.mu.Unlock() }

func (g *fakeGuest) lines() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.received...)
}

func login(t *testing.T, c *Console) {
	t.Helper()
	if err := c.Login(context.Background(), "ubuntu", "pw", 10*time.Second); err != nil {
		t.Fatalf("login: %v", err)
	}
}

func TestLoginFromBootAndAgain(t *testing.T) {
	g, c := newFake(t)
	login(t, c)
	first := len(g.lines())
	// Logging in again finds the suite's prompt and only checks it.
	login(t, c)
	again := g.lines()[first:]
	for _, l := range again {
		if l == "ubuntu" || l == "pw" || l == "sudo -i" {
			t.Fatalf("a second Login must not log in again; it sent %q", again)
		}
	}
}

// loginAtOnce logs in and fails if that took a timeout's length: a prompt
// followed by a console message was not seen as a prompt.
func loginAtOnce(t *testing.T, c *Console) {
	t.Helper()
	start := time.Now()
	login(t, c)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("login took %s: it waited out a timeout for a prompt that ended the output", took)
	}
}

// CI: cloud-init's final stage wrote to the console in the same read as
// the suite's first prompt, which then did not end the output.
func TestLoginWithAConsoleMessageAfterThePrompt(t *testing.T) {
	g, c := newFake(t)
	g.afterPrompt = "[  106.346714] cloud-init[278]: Cloud-init v. 22.4.2 running 'modules:final'\n"
	loginAtOnce(t, c)
}

// A soak run: cloud-init's final stage wrote to the console right after
// sudo's root prompt, which then did not end the output, and the login
// timed out on a shell that was there. Every prompt of the login may be
// followed so.
func TestLoginWithConsoleMessagesAfterEveryPrompt(t *testing.T) {
	g, c := newFake(t)
	g.afterLoginPrompts = "[   55.277072] cloud-init[254]: ** (process:256): WARNING **: 15:49:38.098: Permissions for /etc/netplan/50-cloud-init.yaml are too open.\n"
	loginAtOnce(t, c)
}

func TestRunReturnsOutputAndExitStatus(t *testing.T) {
	g, c := newFake(t)
	g.answers["ip -4 -o addr show dev enp2s0"] = answer{out: "3: enp2s0    inet 203.0.113.10/24 brd 203.0.113.255 scope global enp2s0\n"}
	g.answers["ping -c 1 198.51.100.1"] = answer{out: "1 packets transmitted, 0 received, 100% packet loss\n", code: 1}
	login(t, c)
	out, code, err := c.Run(context.Background(), "ip -4 -o addr show dev enp2s0", 5*time.Second)
	if err != nil || code != 0 || !strings.Contains(out, "inet 203.0.113.10/24") {
		t.Fatalf("got %q, %d, %v", out, code, err)
	}
	if strings.Contains(out, "echo") || strings.Contains(out, Prompt) {
		t.Fatalf("output must hold neither the echoed command nor the prompt: %q", out)
	}
	_, code, err = c.Run(context.Background(), "ping -c 1 198.51.100.1", 5*time.Second)
	if err != nil || code != 1 {
		t.Fatalf("ping to another VLAN: got exit %d, %v; want 1", code, err)
	}
}

// A kernel or service line on the console while a command runs is not the
// command's output: seen in CI, a login's `id -u` read as not root.
func TestConsoleMessagesAreNotOutput(t *testing.T) {
	g, c := newFake(t)
	msg := "[   43.184971] cloud-init[246]: ** (process:248): WARNING **: 14:18:32.632: Permissions for /etc/netplan/50-cloud-init.yaml are too open.\n"
	g.answers["ip -br link show dev enp2s0"] = answer{out: msg + "enp2s0 UP 02:00:00:00:05:01\n[ 7.5] not a kernel time stamp\n"}
	login(t, c)
	out, _, err := c.Run(context.Background(), "ip -br link show dev enp2s0", 5*time.Second)
	if err != nil || out != "enp2s0 UP 02:00:00:00:05:01\n[ 7.5] not a kernel time stamp\n" {
		t.Fatalf("got %q, %v: want the command's own lines alone", out, err)
	}
}

// A console message can land inside a line of output: in CI cloud-init's
// final line came between `id -u`'s "0" and its newline, and the login read
// the shell as not root.
func TestAConsoleMessageInsideALineIsNotOutput(t *testing.T) {
	g, c := newFake(t)
	g.answers["id -u"] = answer{out: "0[   40.827536] cloud-init[248]: Cloud-init v. 22.4.2 finished at Fri, 04 Dec 2026 15:14:47 +0000. Datasource DataSourceNoCloud [seed=/dev/sda][dsmode=net].  Up 40.71 seconds\n\n"}
	login(t, c)
	out, _, err := c.Run(context.Background(), "id -u", 5*time.Second)
	if err != nil || out != "0\n" {
		t.Fatalf("got %q, %v: want the command's own output alone", out, err)
	}
}

// The shell's echo of the command printed again after the first (seen in
// CI: "vcf# id -u; echo ..." then "0") is not output either.
func TestARepeatedEchoIsNotOutput(t *testing.T) {
	g, c := newFake(t)
	login(t, c) // its id -u is command 1
	g.answers["id -u"] = answer{out: Prompt + `id -u; echo ":vcf2:$?:"` + "\n0\n"}
	out, _, err := c.Run(context.Background(), "id -u", 5*time.Second)
	if err != nil || out != "0\n" {
		t.Fatalf("got %q, %v: want the command's own output alone", out, err)
	}
}

// A negative check must not pass on what was on the line before its own
// command was echoed: a previous command's late success, or even a line
// forged to look like this command's result.
func TestStaleOutputNeverAnswersACommand(t *testing.T) {
	g, c := newFake(t)
	const cmd = "ping -c 1 -W 1 198.51.100.1"
	g.answers[cmd] = answer{out: "1 packets transmitted, 0 received, 100% packet loss\n", code: 1}
	login(t, c)
	g.beforeEcho = func(string) string {
		// The late tail of an earlier successful ping (its own marker), then
		// a line shaped like this command's success.
		return "64 bytes from 198.51.100.1: icmp_seq=1 ttl=64 time=0.3 ms\n1 packets transmitted, 1 received, 0% packet loss\n:vcf1:0:\n:vcf2:0:\n"
	}
	out, code, err := c.Run(context.Background(), cmd, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code != 1 || strings.Contains(out, " 1 received") || !strings.Contains(out, " 0 received") {
		t.Fatalf("stale output answered the command: exit %d, output %q", code, out)
	}
}

func TestNoEchoIsATimeoutNotAResult(t *testing.T) {
	g, c := newFake(t)
	login(t, c)
	g.noEcho = true
	g.beforeEcho = func(string) string { return ":vcf2:0:\n" }
	_, code, err := c.Run(context.Background(), "true", 300*time.Millisecond)
	if !errors.Is(err, ErrTimeout) || code != -1 {
		t.Fatalf("want a timeout and no exit status, got %d, %v", code, err)
	}
	if !strings.Contains(err.Error(), "no echo of the command") {
		t.Fatalf("the error must say what was missing: %v", err)
	}
}

func TestRunRejectsMultiLineCommands(t *testing.T) {
	_, c := newFake(t)
	if _, _, err := c.Run(context.Background(), "true\nfalse", time.Second); err == nil {
		t.Fatal("a multi-line command must be refused")
	}
}

func TestEscapeSequencesSplitAcrossReads(t *testing.T) {
	var e escState
	got := e.clean([]byte("a\x1b[?20")) + e.clean([]byte("04hb\r\nc\x1b")) + e.clean([]byte("[0md"))
	if got != "ab\ncd" {
		t.Fatalf("got %q", got)
	}
}

// A console message can land inside the echo of the command itself (CI:
// cloud-init's warnings inside `cloud-init status --wait`'s echo): the
// echo still anchors the command, and its output and status are read.
func TestAConsoleMessageInsideTheEchoStillAnchors(t *testing.T) {
	g, c := newFake(t)
	login(t, c) // its id -u is command 1
	msg := "[   45.277232] cloud-init[261]: ** (process:263): WARNING **: Permissions for /etc/netplan/50-cloud-init.yaml are too open.\n"
	g.noEcho = true
	// The echo, broken by the message, then what the command printed.
	g.beforeEcho = func(string) string {
		return `cloud-init status --wa` + msg + `it >/dev/null; echo ":vcf2:$?:"` + "\n:vcf2:0:\n"
	}
	out, code, err := c.Run(context.Background(), "cloud-init status --wait >/dev/null", 5*time.Second)
	if err != nil || code != 0 || out != "" {
		t.Fatalf("got %q, exit %d, %v: want no output, exit 0", out, code, err)
	}
}
