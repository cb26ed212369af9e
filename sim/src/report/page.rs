//! The frame every report page shares: one self-contained HTML file, its styles and
//! scripts inline, nothing loaded from the network, and text escaped on the way in.
//!
//! Every page carries a small script that records any JavaScript error in a
//! `data-js-errors` attribute on `<html>`, so a test that dumps the DOM from a
//! headless browser sees an error the page hit (see `sim/tests/integration/browser.rs`).

/// `text` escaped for HTML text and attribute values.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            _ => escaped.push(character),
        }
    }
    escaped
}

/// Records errors before anything else runs: see the module header.
const ERROR_TRAP: &str = "<script>\
window.addEventListener('error',function(e){var h=document.documentElement;\
h.setAttribute('data-js-errors',(h.getAttribute('data-js-errors')||'')+(e.message||'error')+';');});\
</script>";

/// Styles every page shares.
const BASE_STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#222}\
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;\
text-align:left;vertical-align:top}th{background:#f2f2f2}code{font:12px monospace;\
word-break:break-all}h1{font-size:20px}h2{font-size:16px;margin-top:24px}\
.fail{color:#b00020;font-weight:bold}.pass{color:#11772b;font-weight:bold}";

/// A whole page: `title`, the page's own `style`, and `body`.
pub fn page(title: &str, style: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"generator\" content=\"coordsim\">{ERROR_TRAP}<title>{}</title>\
         <style>{BASE_STYLE}{style}</style></head>\n<body>\n{body}\n</body></html>\n",
        escape(title)
    )
}
