"""Secrets known by their name: assignments in languages and config formats, flags, XML, SQL.

Each notation is a pattern that ends where the value starts; the name decides (see
``sanitize_names``) before the value is read, so names that hold nothing cost one match.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from app.queue.rules.sanitize_names import (
    HINTS,
    is_authorization_name,
    is_directory_name,
    is_password_name,
    is_placeholder,
    is_secret_name,
    lines_with,
)

Span = tuple[int, int]

# A value: quoted (to the closing quote or the line's end; also JSON inside a JSON string,
# \"...\", and Python's b'...') or bare (to a space or a quote: a password may hold "&", ";"
# or ",", so those do not end it).
_QUOTED = (
    r"(?:[bBrRuUfF]{1,2}+(?=[\"']))?"
    r"(?:\\\"(?:[^\"\\\n]|\\[^\"\n]){0,1024}+(?:\\\")?"
    r"|\"(?:[^\"\\\n]|\\[^\n]){0,1024}+\"?"
    r"|'[^'\n]{0,1024}+'?"
    r"|`[^`\n]{0,1024}+`?)"
)
_BARE = r"[^\s\"'`<>]{1,1024}+"
_VALUE = re.compile(rf"{_QUOTED}|{_BARE}")
_QUOTED_VALUE = re.compile(_QUOTED)
_NAME = r"[A-Za-z_$@][\w.$-]{0,63}+"
_QUOTE = r"(?:\\?[\"'`])"
# name = value, name: value, name => value, name := value, "name": "value", name == "value",
# $config['name'] = value (shell, Python, JS, Ruby, PHP, Go, YAML, JSON, TOML, INI, .env,
# properties, query strings, HTTP headers)
_ASSIGNMENT = re.compile(
    rf"(?<![\w$@.\\/-])(?P<quote>{_QUOTE})?(?P<name>{_NAME}){_QUOTE}?\]?"
    r"(?P<separator>[ \t]{0,5}+(?:=>|:=|={1,3}|!==?|:)[ \t]{0,5}+)"
)
# --password X, --password=X, -storepass X, -Dspring.datasource.password=X
_FLAG = re.compile(r"(?<![\w-])--?(?P<name>[A-Za-z][\w.-]{0,63}+)(?:=|[ \t]{1,5}+(?!-))")
# password 'X', PASSWORD "X" (SQL, prose), setPassword("X"), define('DB_PASSWORD', 'X'),
# getenv("TOKEN", "X"), and aws configure set aws_secret_access_key X
_SPACED = re.compile(rf"(?<![\w$@.-])(?P<name>{_NAME})[ \t]{{1,5}}+(?=[\"'`])")
_CALL = re.compile(r"(?<![\w$@])(?P<name>[A-Za-z_$][\w$]{0,63}+)\([ \t]{0,5}+(?=[\"'`])")
_PAIR = re.compile(
    rf"[(\[][ \t]{{0,5}}+{_QUOTE}(?P<name>{_NAME}){_QUOTE}[ \t]{{0,5}}+,[ \t]{{0,5}}+"
)
_CONFIG_SET = re.compile(
    r"(?i:\bconfig(?:ure)?+(?:[ \t]{1,5}+--?\w{1,32}+)?[ \t]{1,5}+set)[ \t]{1,5}+"
    r"(?P<name>[\w.:/@-]{1,128}+)[ \t]{1,5}+"
)
# <password>X</password>, <entry key="password">X</entry>, key="Password" value="X"
_XML_ELEMENT = re.compile(r"<(?P<name>[\w.:-]{1,64}+)(?:[ \t][^<>\n]{0,256}+)?>(?=[^<\n])")
_NAMING_ATTRIBUTE = r"(?:key|name)[ \t]{0,5}+=[ \t]{0,5}+[\"'](?P<name>[^\"'<>\n]{1,64}+)[\"']"
_XML_NAMED_ELEMENT = re.compile(
    rf"<[\w.:-]{{1,64}}+[ \t]{{1,5}}+{_NAMING_ATTRIBUTE}[^<>\n]{{0,256}}+>(?=[^<\n])"
)
_XML_PAIR = re.compile(
    rf"{_NAMING_ATTRIBUTE}[ \t]{{1,5}}+value[ \t]{{0,5}}+=[ \t]{{0,5}}+(?=[\"'])"
)
_XML_TEXT = re.compile(r"[^<\n]{1,1024}+")
# Flags that name no secret but carry one for these tools: mysql -pX, docker login -p X,
# sshpass -p X, redis-cli -a X, ldapsearch -w X, sqlcmd -P X, curl -u user:X, smbclient -U
# user%X, openssl -passin pass:X, SQL's IDENTIFIED BY X and SET PASSWORD ... = X, and
# .netrc's "machine host login user password X".
_TOOL_FLAGS = re.compile(
    r"(?<![\w./-])(?:"
    r"(?:mysql\w{0,16}+|mariadb[\w-]{0,16}+|mycli)(?![\w-])[^\n]{0,512}?[ \t]-p(?=[^\s-])"
    r"|(?:(?:docker|podman|nerdctl|buildah|skopeo|helm|oras)[ \t]{1,5}+(?:registry[ \t]{1,5}+)?"
    r"login|sshpass|twine|mongo\w{0,16}+)(?![\w-])[^\n]{0,512}?[ \t]-p[ \t]{0,5}+(?=[^\s-])"
    r"|redis-cli(?![\w-])[^\n]{0,512}?[ \t]-a[ \t]{1,5}+"
    r"|ldap\w{1,16}+(?![\w-])[^\n]{0,512}?[ \t]-w[ \t]{1,5}+"
    r"|(?:sqlcmd|bcp|isql)(?![\w-])[^\n]{0,512}?[ \t]-P[ \t]{0,5}+"
    r")|(?<![\w-])(?:(?:-u|--user|--proxy-user)(?:[ \t]{1,5}+|=)[\"']?[^\s:\"']{0,256}+:"
    r"|(?:-U|--user)(?:[ \t]{1,5}+|=)[\"']?[^\s%\"']{1,256}+%"
    r"|-pass(?:in|out)?[ \t]{1,5}+pass:"
    r"|(?i:identified[ \t]{1,5}+(?:with[ \t]{1,5}+\w{1,64}+[ \t]{1,5}+)?by)[ \t]{1,5}+"
    r"|(?i:set[ \t]{1,5}+password\b[^\n=]{0,128}+=)[ \t]{0,5}+"
    r"|(?:machine|default)(?![\w-])[^\n]{0,256}?[ \t]password[ \t]{1,5}+)"
)
_HEADER_SCHEME = re.compile(
    r"(?i:basic|bearer|digest|token|ntlm|negotiate|oauth|aws4-hmac-sha256|ssws|apikey|key|jwt)"
    r"[ \t]{1,5}+(?=\S)"
)
_ANNOTATED = re.compile(rf"[ \t]{{0,5}}+=[ \t]{{0,5}}+(?P<value>{_QUOTED}|{_BARE})")
_LINE_START = re.compile(r"[ \t]*(?:- |export |set )?[ \t]*")


def named_values(text: str) -> Iterator[Span]:
    """Spans of values whose name says they are secrets, in every notation above."""
    for start, end in lines_with(text, HINTS):
        for value_start, value_end in _named_values_in(text[start:end]):
            yield start + value_start, start + value_end


def _named_values_in(text: str) -> Iterator[Span]:
    """named_values of lines that hold a hint (each notation lies within one line)."""
    yield from _assignments(text)
    for pattern in (_FLAG, _CONFIG_SET):
        yield from _values_after(text, pattern, _VALUE)
    yield from _values_after(text, _PAIR, _QUOTED_VALUE)
    yield from _values_after(text, _SPACED, _QUOTED_VALUE, is_password_name)
    yield from _values_after(text, _CALL, _QUOTED_VALUE, _is_setter)
    for pattern in (_XML_ELEMENT, _XML_NAMED_ELEMENT):
        yield from _values_after(text, pattern, _XML_TEXT)
    yield from _values_after(text, _XML_PAIR, _QUOTED_VALUE)
    yield from _values_after(text, _TOOL_FLAGS, _VALUE)


def _values_after(
    text: str,
    pattern: re.Pattern[str],
    value: re.Pattern[str],
    secret_name: Callable[[str], bool] = is_secret_name,
) -> Iterator[Span]:
    """Each value that ``value`` matches where ``pattern`` ends, if ``pattern``'s name (when
    it has one) is a secret's."""
    position = 0
    while (match := pattern.search(text, position)) is not None:
        position = match.end()
        name = match.groupdict().get("name")
        if name is not None and not secret_name(name):
            continue
        found = value.match(text, match.end())
        if found is not None and not is_placeholder(found.group()):
            position = found.end()
            yield found.span()


def _is_setter(name: str) -> bool:
    """A call passes a secret to a setter or a builder (``setPassword("x")``,
    ``.password("x")``), not to a function that checks or looks one up (``verify_password``)."""
    setter = re.match(r"(?:set|with|use)(?=[A-Z_])|[a-z]+$", name.lstrip("_$"))
    return setter is not None and is_secret_name(name)


def _assignments(text: str) -> Iterator[Span]:
    """name = value in all its notations; headers and config lines keep their whole value."""
    position = 0
    while (match := _ASSIGNMENT.search(text, position)) is not None:
        position = match.end()
        name = match.group("name")
        if not is_secret_name(name):
            continue
        found = _VALUE.match(text, match.end())
        if found is None or found.group() in ("{", "[") or found.group().startswith(('{"', '["')):
            continue
        start, end = found.span()
        if is_placeholder(found.group()) or (is_directory_name(name) and found.group()[0] in "/~["):
            continue
        if found.group()[0] not in "\"'`\\":
            annotated = _ANNOTATED.match(text, end) if ":" in match.group("separator") else None
            if annotated is not None:  # TypeScript, Kotlin: password: string = "x"
                if is_placeholder(annotated.group("value")):
                    continue
                start, end = annotated.span("value")
            end = _bare_value_end(text, match, end)
            if is_authorization_name(name):
                scheme = _HEADER_SCHEME.match(text, start)
                start = scheme.end() if scheme is not None and scheme.end() < end else start
        position = end
        yield start, end


def _bare_value_end(text: str, match: re.Match[str], end: int) -> int:
    """Where a bare value ends: a header's and a password's on a config line run to the end
    of the line (``Authorization: Basic x``, ``password = two words``), others at a space."""
    line_end = text.find("\n", match.end())
    line_end = len(text) if line_end == -1 else line_end
    quote = match.group("quote")
    if is_authorization_name(match.group("name")):
        if quote:  # a quoted header: to its closing quote
            closing = text.find(quote[-1], match.end(), line_end)
            return line_end if closing == -1 else closing
        return len(text[:line_end].rstrip())
    line_start = text.rfind("\n", 0, match.start()) + 1
    separator = match.group("separator")
    at_line_start = _LINE_START.fullmatch(text, line_start, match.start()) is not None
    spaced = ":" in separator or separator != separator.strip()
    if at_line_start and spaced and is_password_name(match.group("name")):
        return max(end, len(text[:line_end].rstrip()))
    return end
