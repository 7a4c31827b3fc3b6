package kafka

import (
	"context"
	"fmt"
	"net"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// Conn is how every samla client reaches Kafka: the bootstrap brokers and, when the cluster
// requires it, the SASL mechanism each connection authenticates with. The embedded broker's
// comes from Embedded.Conn; an external cluster's from the SAMLA_KAFKA_SASL_* settings.
type Conn struct {
	Brokers []string
	// SASL authenticates every connection; nil connects without authentication.
	SASL sasl.Mechanism
}

// SASL mechanism names, as Kafka spells them.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
)

// NewMechanism returns the kafka-go SASL mechanism called name (PLAIN, SCRAM-SHA-256 or
// SCRAM-SHA-512) for user and password.
func NewMechanism(name, user, password string) (sasl.Mechanism, error) {
	switch name {
	case MechanismPlain:
		return plain.Mechanism{Username: user, Password: password}, nil
	case MechanismScramSHA256:
		return scram.Mechanism(scram.SHA256, user, password)
	case MechanismScramSHA512:
		return scram.Mechanism(scram.SHA512, user, password)
	default:
		return nil, fmt.Errorf("unknown SASL mechanism %q (want %s, %s or %s)", name, MechanismPlain, MechanismScramSHA256, MechanismScramSHA512)
	}
}

// dialTimeout is kafka-go's DefaultDialer timeout, kept for every connection samla makes.
const dialTimeout = 10 * time.Second

// Dialer returns a kafka-go dialer that authenticates with c.SASL (kafka-go's DefaultDialer
// settings otherwise), for Conn-level use such as DialLeader.
func (c Conn) Dialer() *kafkago.Dialer {
	return &kafkago.Dialer{Timeout: dialTimeout, DualStack: true, SASLMechanism: c.SASL}
}

// transport returns a kafka-go transport of its own (a connection pool that
// CloseIdleConnections releases) that authenticates with c.SASL.
func (c Conn) transport() *kafkago.Transport {
	d := &net.Dialer{Timeout: dialTimeout}
	return &kafkago.Transport{
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		SASL: c.SASL,
	}
}
