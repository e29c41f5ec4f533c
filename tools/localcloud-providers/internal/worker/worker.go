// Package worker runs the Python half of a provider (PROTOCOL.md): one process per provider process,
// started at the first call, JSON lines on its stdin and stdout, one request at a time.
package worker

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/npa-pulumi/localcloud-providers/internal/convert"
)

// Error is a diagnostic the worker answered with.
type Error struct {
	Summary string `json:"summary"`
	Detail  string `json:"detail"`
}

func (e *Error) Error() string { return e.Summary }

// Client talks to one worker; Address is `<namespace>/<type>`, the worker's registry key.
type Client struct {
	Address string

	mu     sync.Mutex
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	nextID int64
	// providerConfig is the provider block's configuration, sent with every call.
	providerConfig any
}

// SetProviderConfig records the provider block's configuration (from Configure).
func (c *Client) SetProviderConfig(cfg any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.providerConfig = cfg
}

// Command is the worker's command line: $NPA_PYTHON (default python3) -m npa_pulumi.simulator.tfproviders.
func (c *Client) Command() []string {
	python := os.Getenv("NPA_PYTHON")
	if python == "" {
		python = "python3"
	}
	return []string{python, "-m", "npa_pulumi.simulator.tfproviders", c.Address}
}

func (c *Client) start() error {
	argv := c.Command()
	cmd := exec.Command(argv[0], argv[1:]...)
	// Terraform keeps a provider's stderr in its log (TF_LOG): the worker's logs go there.
	cmd.Stderr = os.Stderr
	// The worker dies with the provider, whoever kills it (Terraform at the end of a run, or a signal).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the local cloud's provider worker (%s): %w", argv[0], err)
	}
	c.cmd, c.stdin, c.stdout = cmd, stdin, bufio.NewReaderSize(stdout, 1<<20)
	return nil
}

// stop forgets a worker that broke the protocol; the next call starts a new one.
func (c *Client) stop() {
	if c.cmd == nil {
		return
	}
	_ = c.stdin.Close()
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
	c.cmd = nil
}

// Call sends one request and returns its result (JSON, numbers exact) or the worker's *Error.
func (c *Client) Call(method, typeName string, fields map[string]any) (any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		if err := c.start(); err != nil {
			return nil, err
		}
	}
	c.nextID++
	req := map[string]any{"id": c.nextID, "method": method, "type": typeName, "provider_config": c.providerConfig}
	for k, v := range fields {
		req[k] = v
	}
	line, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := c.stdin.Write(append(line, '\n')); err != nil {
		c.stop()
		return nil, fmt.Errorf("the provider worker is gone: %w", err)
	}
	answer, err := c.stdout.ReadBytes('\n')
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("the provider worker is gone (see its log above): %w", err)
	}
	var resp struct {
		ID     int64           `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *Error          `json:"error"`
	}
	if err := json.Unmarshal(answer, &resp); err != nil || resp.ID != c.nextID {
		c.stop()
		return nil, errors.New("the provider worker answered out of protocol: " + string(answer))
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	if len(resp.Result) == 0 {
		return nil, nil
	}
	return convert.Decode(resp.Result)
}
