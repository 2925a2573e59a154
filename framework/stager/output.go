package stager

import (
	"bytes"
	"regexp"
	"strings"
	"time"
)

// SummaryPrefix begins the line that names every plugin a run could not
// write (the guide: "A line beginning `failed to install:` names plugins
// the container could not write").
const SummaryPrefix = "failed to install:"

// Summary finds the first of lines beginning SummaryPrefix.
func Summary(lines []string) (line string, index int, ok bool) {
	for i, l := range lines {
		if strings.HasPrefix(l, SummaryPrefix) {
			return l, i, true
		}
	}
	return "", -1, false
}

// NamesPlugin: plugin appears in line as a name of its own: "vlan" in
// "vlan:", in "/x/.vlan.tmp" or in a script's temporary path
// "/x/.tmp-multus-vlan", not in "macvlan". The guide asks that the line
// name the plugin, not in which words ("-" is no part of a name here: no
// plugin's name is another's with a "-" part added).
func NamesPlugin(line, plugin string) bool {
	re := regexp.MustCompile(`(^|[^A-Za-z0-9_])` + regexp.QuoteMeta(plugin) + `($|[^A-Za-z0-9_])`)
	return re.MatchString(line)
}

// Output is what the container said, as the kubelet and `kubectl logs`
// report it.
type Output struct {
	ExitCode int
	// Log is stdout and stderr as one stream, in the order written, as
	// `kubectl logs` shows them (both are the same pipe).
	Log string
	// LogTimes holds when each line of the log arrived (as LogLines).
	LogTimes []time.Time
	// TerminationMessage is what the kubelet would report: the file at
	// terminationMessagePath, or with FallbackToLogsOnError and a non-zero
	// exit, the log's tail.
	TerminationMessage string
}

// LogLines splits the log into lines without their newline.
func (o Output) LogLines() []string {
	s := strings.TrimRight(o.Log, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// lineClock collects the log and notes when each line arrives, so the
// specs can tell a line written while staging went on from one written at
// the end.
type lineClock struct {
	buf   bytes.Buffer
	times []time.Time
}

func (c *lineClock) Write(p []byte) (int, error) {
	now := time.Now()
	for _, b := range p {
		if b == '\n' {
			c.times = append(c.times, now)
		}
	}
	return c.buf.Write(p)
}

func (c *lineClock) done() (string, []time.Time) {
	s := c.buf.String()
	if s != "" && !strings.HasSuffix(s, "\n") {
		c.times = append(c.times, time.Now())
	}
	return s, c.times
}

// kubeletTerminationMessage mirrors the kubelet: the file's content (at most
// 4096 bytes); with FallbackToLogsOnError, an empty file and a failed
// container, the last 80 lines of the log (at most 2048 bytes).
func kubeletTerminationMessage(file, policy string, exitCode int, log string) string {
	if len(file) > 4096 {
		file = file[:4096]
	}
	if file != "" || policy != "FallbackToLogsOnError" || exitCode == 0 {
		return file
	}
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	if len(lines) > 80 {
		lines = lines[len(lines)-80:]
	}
	tail := strings.Join(lines, "\n")
	if len(tail) > 2048 {
		tail = tail[len(tail)-2048:]
	}
	return tail
}
