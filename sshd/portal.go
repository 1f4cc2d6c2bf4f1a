package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// portal sends the session reports: POST URL/api/v1/ssh-sessions/ with the pod's report token.
type portal struct {
	url    string
	token  string
	client *http.Client
}

const reportTimeout = 5 * time.Second

func newPortal(base, token string) *portal {
	return &portal{url: strings.TrimRight(base, "/") + "/api/v1/ssh-sessions/", token: token,
		client: &http.Client{Timeout: reportTimeout}}
}

// post sends one report; a non-nil error means the portal did not answer (unreachable, timed out).
func (p *portal) post(body any, answer any) (int, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return 0, fmt.Errorf("encoding the report: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(data))
	if err != nil {
		return 0, fmt.Errorf("the report's request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.token)
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, err // names the method, the address and what failed
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, fmt.Errorf("reading the portal's answer: %w", err)
	}
	if resp.StatusCode == http.StatusOK && answer != nil {
		if err := json.Unmarshal(raw, answer); err != nil {
			return resp.StatusCode, fmt.Errorf("the portal's answer is not the JSON expected: %w", err)
		}
	}
	return resp.StatusCode, nil
}

type startReport struct {
	Event   string `json:"event"`
	Session string `json:"session"`
	User    string `json:"user"`
	Serial  uint64 `json:"serial"`
	KeyID   string `json:"key_id"`
	From    string `json:"from"`
}

// start asks whether a session may begin; why says what the decision rests on when it is not
// the portal's plain yes. Unreachable, timed out or 5xx: admitted on the certificate alone
// (valid minutes). 401/403 (a wrong report token: a misconfigured pod) and any other answer the
// portal's contract does not have: refused.
func (p *portal) start(report startReport) (allowed bool, why error) {
	report.Event = "start"
	var answer struct {
		Allowed *bool  `json:"allowed"`
		Reason  string `json:"reason"`
	}
	status, err := p.post(report, &answer)
	switch {
	case err != nil && status == 0:
		return true, fmt.Errorf("the portal did not answer the start report: %w", err)
	case status >= 500:
		return true, fmt.Errorf("the portal answered the start report with %d", status)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return false, fmt.Errorf("the portal refused this pod's report token (%d): check its report_token", status)
	case err != nil:
		return false, err
	case status != http.StatusOK || answer.Allowed == nil:
		return false, fmt.Errorf("the portal answered the start report with %d and no decision", status)
	case !*answer.Allowed:
		return false, errors.New("the portal refused: " + answer.Reason)
	}
	return true, nil
}

// check asks which of the open sessions must end: session id → reason.
func (p *portal) check(sessions []string) (map[string]string, error) {
	var answer struct {
		End map[string]string `json:"end"`
	}
	status, err := p.post(map[string]any{"event": "check", "sessions": sessions}, &answer)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("the portal answered %d", status)
	}
	return answer.End, err
}

// end reports a session's end, retried on no answer or 5xx (three times, backing off).
func (p *portal) end(session, reason string) error {
	body := map[string]string{"event": "end", "session": session, "reason": reason}
	var err error
	for attempt, pause := 0, 250*time.Millisecond; attempt < 4; attempt, pause = attempt+1, pause*2 {
		if attempt > 0 {
			time.Sleep(pause)
		}
		var status int
		status, err = p.post(body, nil)
		if err == nil && status < 300 {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("the portal answered %d", status)
			if status < 500 {
				return err
			}
		}
	}
	return err
}
