"""An answer's Markdown image is never an <img>: the browser would fetch whatever URL the model wrote (a
tracking pixel, an address on the lab's LAN). It stays a link the reader can see and follow, or not."""

from jobs.chat.conversations import render


def test_it_renders_an_image_as_a_link_not_an_img():
    html = render("Look: ![chart](http://127.0.0.1:9/probe.png) and ![ref][1]\n\n[1]: http://10.0.0.1/x.png")
    assert "<img" not in html
    assert '<a href="http://127.0.0.1:9/probe.png">chart</a>' in html


def test_it_still_renders_links_and_text():
    assert render("[docs](https://example.org) **bold**") == (
        '<p><a href="https://example.org">docs</a> <strong>bold</strong></p>\n')
