package signingsim

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/platform/retry"
)

// queueSeal hands a signed process to the seal workers without waiting: when the queue is full
// the sweeper queues it later. Called with mu held.
func (p *Provider) queueSeal(pr *process) {
	select {
	case p.sealJobs <- pr.id:
		pr.sealQueued = true
	default:
	}
}

func (p *Provider) sealWorker() {
	defer p.wg.Done()
	for {
		select {
		case <-p.ctx.Done():
			return
		case id := <-p.sealJobs:
			p.sealOne(id)
		}
	}
}

// sealOne makes the sealed PDF of a signed process at once (the CPU work) and lets it become
// available at the process's sealDue, as a real provider's sealing queue would.
func (p *Provider) sealOne(id string) {
	p.mu.Lock()
	pr := p.procs[id]
	if pr == nil {
		p.mu.Unlock()
		return
	}
	if pr.state != StateSigned || pr.sealed || pr.sealedDoc != nil {
		pr.sealQueued = false
		p.mu.Unlock()
		return
	}
	pr.sealQueued = true // keeps the sweeper from queueing it again while it runs here
	doc, fail := pr.document, pr.failSeal
	info := sealInfo{
		ProcessID: pr.id, Reference: pr.reference, Title: pr.title, SignerName: pr.signer.Name,
		SignedAt: pr.signedAt, SignatureMethod: SignatureMethod, SealedAt: p.now(),
	}
	p.mu.Unlock()

	var out []byte
	var err error
	if fail {
		err = fmt.Errorf("the document carries %s", FailSealMarker)
	} else {
		out, err = p.sealer.seal(doc, info)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	pr.sealQueued = false
	now := p.now()
	if err != nil {
		p.sealFailures.Add(1)
		// Not the error text: PDF libraries quote the document's content, which is personal data.
		p.opts.logger.Warn("signing simulator could not seal a signed document", "processId", id)
		pr.errCode, pr.errMessage = "SEAL_FAILED", "The signed document could not be sealed."
		p.finish(pr, StateFailed, now)
		return
	}
	p.seals.Add(1)
	p.storedBytes += int64(len(out) - len(pr.document))
	pr.document, pr.sealedDoc = nil, out
	if p.closed {
		return
	}
	if wait := time.Until(pr.sealDue); wait > 0 {
		p.timers[id] = time.AfterFunc(wait, func() { p.sealTimer(id) })
		return
	}
	p.markSealed(pr, now)
}

func (p *Provider) sealTimer(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.timers, id)
	if p.closed {
		return
	}
	if pr := p.procs[id]; pr != nil && pr.state == StateSigned && !pr.sealed && pr.sealedDoc != nil {
		p.markSealed(pr, p.now())
	}
}

// markSealed makes the sealed PDF downloadable. Called with mu held.
func (p *Provider) markSealed(pr *process, now time.Time) {
	pr.sealed, pr.finishedAt = true, now
	p.emit(pr, now)
}

// callbackBody is what a callback POSTs.
type callbackBody struct {
	EventID   string    `json:"eventId"`
	ProcessID string    `json:"processId"`
	Reference string    `json:"reference"`
	State     State     `json:"state"`
	Sealed    bool      `json:"sealed"`
	At        time.Time `json:"at"`
}

// emit queues the callback of a state change. Callbacks carry the state at the change; they may
// arrive out of order or (after a lost answer) twice, so a receiver dedups by eventId and treats
// them as a hint to read the process. Called with mu held.
func (p *Provider) emit(pr *process, now time.Time) {
	if pr.callbackURL == "" || p.closed {
		return
	}
	if p.dropCallbacks.Load() {
		p.callbacksDropped.Add(1)
		return
	}
	body, err := json.Marshal(callbackBody{
		EventID: uuid.NewString(), ProcessID: pr.id, Reference: pr.reference,
		State: pr.state, Sealed: pr.sealed, At: now.UTC(),
	})
	if err != nil {
		return // cannot happen: plain strings and a time
	}
	select {
	case p.events <- event{processID: pr.id, url: pr.callbackURL, apiKey: pr.apiKey, body: body}:
	default:
		p.callbacksDropped.Add(1)
		p.opts.logger.Warn("signing simulator callback queue full; callback dropped", "processId", pr.id)
	}
}

func (p *Provider) callbackWorker() {
	defer p.wg.Done()
	for {
		select {
		case <-p.ctx.Done():
			return
		case ev := <-p.events:
			p.deliver(ev)
		}
	}
}

// deliver POSTs one callback, retrying a non-2xx answer or a network error with backoff.
func (p *Provider) deliver(ev event) {
	for attempt := 1; ; attempt++ {
		status, err := p.post(ev)
		if err == nil && status >= 200 && status < 300 {
			p.callbacksSent.Add(1)
			return
		}
		if p.ctx.Err() != nil {
			return
		}
		if attempt >= p.opts.callbackAttempts {
			p.callbacksFailed.Add(1)
			// The URL is left out: it is the client's and may carry a token of its own.
			p.opts.logger.Warn("signing simulator gave up a callback", "processId", ev.processID,
				"attempts", attempt, "status", status)
			return
		}
		if retry.Sleep(p.ctx, p.opts.callbackBackoff.Delay(attempt)) != nil {
			return
		}
	}
}

func (p *Provider) post(ev event) (int, error) {
	t := p.now().Unix()
	req, err := http.NewRequestWithContext(p.ctx, http.MethodPost, ev.url, bytes.NewReader(ev.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "SamlaSandboxSigning/1")
	req.Header.Set(SignatureHeader, "t="+strconv.FormatInt(t, 10)+",v1="+callbackSignature(ev.apiKey, t, ev.body))
	resp, err := p.opts.callbackClient.Do(req)
	if err != nil {
		return 0, err
	}
	// Drained (bounded) so that the connection is reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// callbackSignature is hex(HMAC-SHA256(key=apiKey, "<t>.<body>")).
func callbackSignature(apiKey string, t int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(apiKey))
	m.Write([]byte(strconv.FormatInt(t, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}
