package poa

// ExampleTemplate is a working Swedish power of attorney for cancelling one insurance; `samla
// clients signing --example-template` prints it as a starting point. It uses every placeholder
// and every layout element. Its prose paragraphs are one line each, because line breaks inside a
// paragraph are kept; the renderer wraps them.
const ExampleTemplate = `# Fullmakt – uppsägning av försäkring

Jag, {{holderName}}, ger härmed {{clientName}} fullmakt att för min räkning säga upp försäkring {{insuranceNumber}} ({{insuranceType}}) hos {{company}} från och med {{cancellationDate}}.

Fullmakten gäller endast uppsägningen av försäkringen ovan. {{clientName}} får ta emot bekräftelse på uppsägningen och besked om eventuell återbetalning av premie.

# Försäkringstagare

Namn: {{holderName}}
Personnummer: {{personalNumber}}
Försäkringsnummer: {{insuranceNumber}}

Ort och datum: {{place}}, {{date}}

---
`
