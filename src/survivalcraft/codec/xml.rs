//! A read-only XML element tree that remembers where every element and attribute value
//! lies in the source bytes.
//!
//! Project.xml edits must leave every other byte as it was (spec §10, DESIGN "Writing"), so
//! the writer never re-serializes: it finds the byte ranges to replace through these spans
//! and splices text in. quick-xml does the tokenizing and well-formedness checks.

use std::borrow::Cow;
use std::ops::Range;

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

use crate::error::{Error, Result};

/// Deepest nesting accepted (Project.xml is about 8 deep).
const MAX_DEPTH: usize = 256;

/// An attribute with its unescaped value and the span of its raw value in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    /// Attribute name.
    pub name: String,
    /// Unescaped value.
    pub value: String,
    /// Source bytes of the raw (escaped) value, without the quotes.
    pub span: Range<usize>,
}

/// An element with its source spans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    /// Element name.
    pub name: String,
    /// Attributes in source order.
    pub attrs: Vec<Attr>,
    /// The whole element, from `<` of the start tag to after its end tag.
    pub span: Range<usize>,
    /// The start tag (the whole element when self-closing).
    pub start_tag: Range<usize>,
    /// Whether the element is written `<x ... />`.
    pub self_closing: bool,
    /// Child elements.
    pub children: Vec<Element>,
}

impl Element {
    /// The value of an attribute.
    pub fn attr(&self, name: &str) -> Option<&Attr> {
        self.attrs.iter().find(|a| a.name == name)
    }

    /// Children with element name `name` and attribute `Name` = `value`.
    pub fn named<'a>(
        &'a self,
        element: &'a str,
        value: &'a str,
    ) -> impl Iterator<Item = &'a Element> + 'a {
        self.children
            .iter()
            .filter(move |c| c.name == element && c.attr("Name").is_some_and(|a| a.value == value))
    }

    /// The first child `<Values Name="name">`.
    pub fn values<'a>(&'a self, name: &'a str) -> Option<&'a Element> {
        self.named("Values", name).next()
    }

    /// The first child `<Value Name="name" ... Value="...">`'s `Value` attribute.
    pub fn value<'a>(&'a self, name: &'a str) -> Option<&'a Attr> {
        self.named("Value", name)
            .next()
            .and_then(|v| v.attr("Value"))
    }
}

fn text(b: &[u8]) -> Result<String> {
    String::from_utf8(b.to_vec()).map_err(|_| Error::corrupt("XML name is not UTF-8"))
}

fn element_of(src: &[u8], start: usize, tag: &BytesStart<'_>) -> Result<Element> {
    let mut attrs = Vec::new();
    for a in tag.attributes() {
        let a = a.map_err(|e| error_at(src, start, &format!("XML attribute: {e}")))?;
        let Cow::Borrowed(raw) = a.value else {
            return Err(error_at(src, start, "XML attribute is not in the source"));
        };
        let at = (raw.as_ptr() as usize).wrapping_sub(src.as_ptr() as usize);
        if at > src.len() || at + raw.len() > src.len() {
            return Err(Error::corrupt("XML attribute outside the source"));
        }
        let value = a
            .unescape_value()
            .map_err(|e| error_at(src, start, &format!("XML attribute: {e}")))?
            .into_owned();
        attrs.push(Attr {
            name: text(a.key.as_ref())?,
            value,
            span: at..at + raw.len(),
        });
    }
    Ok(Element {
        name: text(tag.name().as_ref())?,
        attrs,
        span: start..start,
        start_tag: start..start,
        self_closing: false,
        children: Vec::new(),
    })
}

/// An error at byte `at` of `src`, given as line and column (from 1) for people editing it.
fn error_at(src: &[u8], at: usize, message: &str) -> Error {
    let before = src.get(..at).unwrap_or(src);
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
    Error::corrupt(format!("line {line}, column {column}: {message}"))
}

/// Parses a document and returns its root element.
pub fn parse(src: &[u8]) -> Result<Element> {
    let mut reader = Reader::from_reader(src);
    reader.config_mut().trim_text(false);
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    loop {
        let start = reader.buffer_position() as usize;
        let event = reader
            .read_event()
            .map_err(|e| error_at(src, start, &format!("XML error: {e}")))?;
        let end = reader.buffer_position() as usize;
        match event {
            Event::Start(_) | Event::Empty(_) if root.is_some() => {
                return Err(error_at(src, start, "XML has a second root element"));
            }
            Event::Start(tag) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(Error::corrupt("XML nests too deeply"));
                }
                let mut el = element_of(src, start, &tag)?;
                el.start_tag = start..end;
                stack.push(el);
            }
            Event::Empty(tag) => {
                let mut el = element_of(src, start, &tag)?;
                el.start_tag = start..end;
                el.span = start..end;
                el.self_closing = true;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(el),
                    None => root = Some(el),
                }
            }
            Event::End(_) => {
                let mut el = stack
                    .pop()
                    .ok_or_else(|| error_at(src, start, "XML end tag without start"))?;
                el.span = el.start_tag.start..end;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(el),
                    None => root = Some(el),
                }
            }
            Event::Eof => break,
            Event::Text(t) if stack.is_empty() => {
                let t = t.strip_prefix(b"\xEF\xBB\xBF".as_slice()).unwrap_or(&t);
                if !t.iter().all(u8::is_ascii_whitespace) {
                    return Err(error_at(
                        src,
                        start,
                        "XML has text outside the root element",
                    ));
                }
            }
            Event::CData(_) if stack.is_empty() => {
                return Err(error_at(
                    src,
                    start,
                    "XML has CDATA outside the root element",
                ));
            }
            _ => {}
        }
    }
    if let Some(open) = stack.last() {
        return Err(error_at(
            src,
            open.start_tag.start,
            &format!("XML ends before <{}> here is closed", open.name),
        ));
    }
    root.ok_or_else(|| Error::corrupt("XML has no root element"))
}

/// Applies non-overlapping byte-range replacements to `src`.
pub fn splice(src: &[u8], mut edits: Vec<(Range<usize>, Vec<u8>)>) -> Result<Vec<u8>> {
    edits.sort_by_key(|e| (e.0.start, e.0.end));
    let mut out = Vec::with_capacity(src.len() + 256);
    let mut at = 0;
    for (r, text) in edits {
        if r.start < at || r.end < r.start || r.end > src.len() {
            return Err(Error::invalid("overlapping XML edits"));
        }
        out.extend_from_slice(&src[at..r.start]);
        out.extend_from_slice(&text);
        at = r.end;
    }
    out.extend_from_slice(&src[at..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_point_at_the_source() {
        let src = br#"<?xml version="1.0"?><a x="1 &amp; 2"><b Name="n" Value="v" /><c></c></a>"#;
        let root = parse(src).unwrap();
        assert_eq!(root.name, "a");
        let x = root.attr("x").unwrap();
        assert_eq!(x.value, "1 & 2");
        assert_eq!(&src[x.span.clone()], b"1 &amp; 2");
        let b = &root.children[0];
        assert!(b.self_closing);
        assert_eq!(&src[b.span.clone()], br#"<b Name="n" Value="v" />"#);
        assert_eq!(&src[root.children[1].span.clone()], b"<c></c>");
        assert_eq!(root.span, 21..src.len());
    }

    #[test]
    fn malformed_documents_are_errors() {
        for bad in [
            &b"<a><b></a>"[..],
            b"<a>",
            b"",
            b"<a x=1></a>",
            b"<a></a><b/>",
            b"\xff<a/>",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        let e = parse(b"<a>\n  <b x=\"1\">\n  <c/>\n</a>").unwrap_err();
        assert!(e.message().starts_with("line "), "{e}");
        let e = parse(b"<a>\n  <b>\n  <c/>\n").unwrap_err();
        assert!(e.message().contains("line 2, column 3"), "{e}");
    }

    #[test]
    fn splice_replaces_ranges() {
        let out = splice(
            b"hello world",
            vec![(6..11, b"there".to_vec()), (0..0, b">".to_vec())],
        )
        .unwrap();
        assert_eq!(out, b">hello there");
        assert!(splice(b"abc", vec![(0..2, vec![]), (1..3, vec![])]).is_err());
    }
}
