package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/sync/semaphore"
)

// Large bodies share one budget: with room for two at once, the third waits until one is done,
// and small bodies never wait.
func TestLargeBodiesShareABudget(t *testing.T) {
	const size = 2 << 20 // above DefaultMaxBodyBytes
	env := newEnv(t, func(o *Options) { o.LargeBodyBudget = 2 * size })
	inside := make(chan int64, 4) // the body size of each request the handler runs
	releaseLarge, releaseSmall := make(chan struct{}), make(chan struct{})
	env.engine.POST("/upload", MaxBody(4<<20), func(c *gin.Context) {
		inside <- c.Request.ContentLength
		if c.Request.ContentLength > DefaultMaxBodyBytes {
			<-releaseLarge
		} else {
			<-releaseSmall
		}
		c.Status(http.StatusNoContent)
	})
	post := func(body string) int {
		return env.do(t, http.MethodPost, "/upload", body, authed("Content-Type", "application/json")).Code
	}
	largeBody := `{"f":"` + strings.Repeat("a", size-8) + `"}`
	codes := make(chan int, 3)
	for range 3 {
		go func() { codes <- post(largeBody) }()
	}
	<-inside
	<-inside
	// A small body of the same route does not wait for the budget the two large ones fill.
	small := make(chan int, 1)
	go func() { small <- post(`{"f":"a"}`) }()
	if n := <-inside; n > DefaultMaxBodyBytes {
		t.Fatal("a third large body was let in beside two that fill the budget")
	}
	releaseSmall <- struct{}{}
	if code := <-small; code != http.StatusNoContent {
		t.Fatalf("small body = %d", code)
	}
	select {
	case <-inside:
		t.Fatal("a third large body was let in beside two that fill the budget")
	case <-time.After(50 * time.Millisecond):
	}
	releaseLarge <- struct{}{} // one large body is done: the third gets in
	if n := <-inside; n <= DefaultMaxBodyBytes {
		t.Fatalf("a body of %d bytes came in, want the third large one", n)
	}
	close(releaseLarge)
	for range 3 {
		if code := <-codes; code != http.StatusNoContent {
			t.Fatalf("large body = %d", code)
		}
	}
}

// A large body that finds the budget spent for the whole wait gets a 503 problem with
// Retry-After.
func TestLargeBodyOverBudgetIs503(t *testing.T) {
	large := &largeBodies{sem: semaphore.NewWeighted(1), budget: 1, wait: 20 * time.Millisecond}
	if !large.sem.TryAcquire(1) { // spent by a body that never finishes
		t.Fatal("fresh budget is spent")
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.Use(bodyLimit(DefaultMaxBodyBytes, large))
	e.POST("/upload", MaxBody(4<<20), func(c *gin.Context) { c.Status(http.StatusNoContent) })
	w := httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/upload", strings.NewReader(strings.Repeat("a", 2<<20))))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" ||
		!strings.HasPrefix(w.Header().Get("Content-Type"), ContentTypeProblem) {
		t.Fatalf("over budget = %d %v %s", w.Code, w.Header(), w.Body)
	}
}

func TestRepeatedContentTypeIsRefused(t *testing.T) {
	env := newEnv(t, nil)
	r := httptest.NewRequest(http.MethodPost, "/echo", strings.NewReader(`{"name":"a"}`))
	r.Header.Set(HeaderAPIKey, testKey)
	r.Header.Add("Content-Type", "application/json")
	r.Header.Add("Content-Type", "text/plain")
	w := httptest.NewRecorder()
	env.engine.ServeHTTP(w, r)
	p := decodeProblem(t, w, http.StatusBadRequest, CodeValidationFailed)
	if len(p.Errors) != 1 || p.Errors[0].Field != "Content-Type" {
		t.Fatalf("errors = %+v", p.Errors)
	}
}

// Field errors repeat what the client sent (names, types) only up to a bound, so an answer is
// never much larger than its request.
func TestFieldErrorsRepeatBoundedText(t *testing.T) {
	long := strings.Repeat("<", 65_000)
	p := ValidationProblem("bad", FieldError{Field: "parameters[0].type", Message: long + " already given"},
		FieldError{Field: "input." + long, Message: "is not a known input"})
	for _, fe := range p.Errors {
		if len(fe.Field) > maxFieldErrorPath+len("…") || len(fe.Message) > maxFieldErrorMessage+len("…") {
			t.Fatalf("field error of %d+%d bytes", len(fe.Field), len(fe.Message))
		}
	}
	if !strings.HasSuffix(p.Errors[0].Message, "…") {
		t.Fatalf("clipped message = %q", p.Errors[0].Message)
	}
}
