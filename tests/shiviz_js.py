"""ShiViz's own reading of a log, in JavaScript (node): its regular expression over the whole text with
the ``m`` flag, every event's clock parsed as JSON, and the rules ShiViz enforces on vector clocks. The
script prints ``{"events": N, "receives": R}`` (receives: events whose text starts with "receive from")
or fails with the first broken rule."""

SHIVIZ_CHECK = r"""
const fs = require('fs');
const text = fs.readFileSync(process.argv[2], 'utf8');
const [regex, blank, ...rest] = text.split('\n');
if (blank !== '') throw new Error('no blank line after the regular expression');
const re = new RegExp(regex, 'gm');
const events = [];
let m, matched = 0;
const body = rest.join('\n');
while ((m = re.exec(body)) !== null) {
  if (m[0] === '') { re.lastIndex++; continue; }
  events.push({host: m.groups.host, clock: JSON.parse(m.groups.clock), event: m.groups.event});
  matched += m[0].length + 1;
}
const lines = rest.filter(l => l !== '').length;
if (events.length * 2 !== lines) throw new Error(`matched ${events.length} events of ${lines / 2}`);
// ShiViz's rules: a host's own entry grows by exactly one per event; a receive's clock covers the
// send's (happens-before), so every entry is at least the previous event's of the same host
const last = {};
for (const e of events) {
  const prev = last[e.host] || {};
  if ((e.clock[e.host] || 0) !== (prev[e.host] || 0) + 1) throw new Error('own clock must grow by 1: ' + JSON.stringify(e));
  for (const h in prev) if ((e.clock[h] || 0) < prev[h]) throw new Error('clock went back: ' + JSON.stringify(e));
  for (const h in e.clock) if (h !== e.host && e.clock[h] > ((last[h] || {})[h] || 0)) throw new Error('knows the future of ' + h);
  last[e.host] = e.clock;
}
const receives = events.filter(e => e.event.startsWith('receive from')).length;
console.log(JSON.stringify({events: events.length, receives}));
"""
