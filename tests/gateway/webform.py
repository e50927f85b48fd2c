"""A browser with JavaScript off, for tests: the forms of a page as HTML
defines them (fields, a button's ``form=``, ``formaction``, ``name`` and
``value``), so a test clicks a button exactly as such a browser would."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Form:
    id: str
    action: str
    method: str
    fields: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Button:
    attrs: dict[str, str]
    form: Form | None  # the enclosing one, until a form= attribute names another
    label: str = ""


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[Form] = []
        self.buttons: list[Button] = []
        self.links: list[tuple[dict[str, str], str]] = []
        self._form: Form | None = None
        self._text: tuple[str, list[str]] | None = None  # a textarea's name and words
        self._select: str | None = None
        self._first_option: tuple[str, str] | None = None
        self._selected = False
        self._button: Button | None = None
        self._link: tuple[dict[str, str], list[str]] | None = None

    def handle_starttag(self, tag: str, raw: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in raw}
        if tag == "form":
            self._form = Form(a.get("id", ""), a.get("action", ""), a.get("method", "get").lower())
            self.forms.append(self._form)
        elif tag == "input" and self._form is not None and a.get("name"):
            if a.get("type") not in ("checkbox", "radio") or "checked" in a:
                self._form.fields.append((a["name"], a.get("value", "")))
        elif tag == "textarea" and self._form is not None:
            self._text = (a.get("name", ""), [])
        elif tag == "select" and self._form is not None:
            self._select, self._first_option, self._selected = a.get("name", ""), None, False
        elif tag == "option" and self._select is not None and self._form is not None:
            if self._first_option is None:
                self._first_option = (self._select, a.get("value", ""))
            if "selected" in a:
                self._form.fields.append((self._select, a.get("value", "")))
                self._selected = True
        elif tag == "button":
            self._button = Button(a, self._form)
            self.buttons.append(self._button)
        elif tag == "a":
            self._link = (a, [])

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None
        elif tag == "textarea" and self._text is not None and self._form is not None:
            text = "".join(self._text[1])
            self._form.fields.append((self._text[0], text[1:] if text.startswith("\n") else text))
            self._text = None
        elif tag == "select" and self._select is not None:
            if not self._selected and self._first_option is not None and self._form is not None:
                self._form.fields.append(self._first_option)
            self._select = None
        elif tag == "button":
            self._button = None
        elif tag == "a" and self._link is not None:
            self.links.append((self._link[0], "".join(self._link[1]).strip()))
            self._link = None

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text[1].append(data)
        if self._button is not None:
            self._button.label += data
        if self._link is not None:
            self._link[1].append(data)


@dataclass
class Page:
    forms: list[Form]
    buttons: list[Button]
    links: list[tuple[dict[str, str], str]]

    def button(self, aria_label: str) -> Button:
        found = [b for b in self.buttons if b.attrs.get("aria-label") == aria_label or b.label.strip() == aria_label]
        assert found, f"no button {aria_label!r}"
        return found[0]

    def link(self, aria_label: str) -> str:
        found = [a["href"] for a, text in self.links if a.get("aria-label") == aria_label or text == aria_label]
        assert found, f"no link {aria_label!r}"
        return found[0]

    def submit(self, button: Button) -> tuple[str, str, list[tuple[str, str]]]:
        """(method, action, fields) of a click on ``button``."""
        form = button.form
        if "form" in button.attrs:
            named = [f for f in self.forms if f.id == button.attrs["form"]]
            assert named, f"button names form {button.attrs['form']!r}, not on the page"
            form = named[0]
        assert form is not None, "a button outside any form"
        fields = list(form.fields)
        if button.attrs.get("name"):
            fields.append((button.attrs["name"], button.attrs.get("value", "")))
        return (button.attrs.get("formmethod") or form.method, button.attrs.get("formaction") or form.action, fields)


def parse(html: str) -> Page:
    p = _Parser()
    p.feed(html)
    p.close()
    return Page(p.forms, p.buttons, p.links)
