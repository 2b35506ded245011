"""Every URL a user gives is shown and stored without its secrets (issue 58, item 4)."""

import pytest

from infermeter.util.urls import masked_text, masked_url, without_credentials


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("http://alice:pw@127.0.0.1:8000/v1", "http://alice:***@127.0.0.1:8000/v1"),
        ("https://TOKEN@api.example.com/v1", "https://***@api.example.com/v1"),
        ("http://h/metrics?api_key=zz&x=2", "http://h/metrics?api_key=***&x=2"),
        ("http://h/m?token=a&sig=b&page=3", "http://h/m?token=***&sig=***&page=3"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),  # nothing secret: as given
        ("not a url", "not a url"),
    ],
)
def test_a_url_is_shown_without_its_password_or_secret_query_values(given, shown):
    assert masked_url(given) == shown


def test_urls_inside_a_message_are_masked_and_the_rest_kept():
    said = "Client error '401' for url 'http://u:hunter2@h/metrics?token=q1' (see docs)"
    assert (
        masked_text(said)
        == "Client error '401' for url 'http://u:***@h/metrics?token=***' (see docs)"
    )


def test_credentials_in_a_url_become_basic_auth_for_the_client():
    assert without_credentials("http://u:p%40ss@h:8/m?x=1") == ("http://h:8/m?x=1", ("u", "p@ss"))
    assert without_credentials("http://h/m") == ("http://h/m", None)
